package ui

import "p2pfault/fault"

// Controller is what the dashboard asks of a running experiment; its keys
// call it from commands, and it never signals a process itself. The
// experiment (one arm: experiment.Experiment; several: experiment.Group)
// implements it.
type Controller interface {
	// Fire takes action a (a key's kind on the selected source); a kind
	// that takes a duration and is given none lasts the run's fault
	// length.
	Fire(a fault.Action) error
	SetProbing(on bool) // pause or resume the probe
	LogTail(engine string, n int) []string
}

// ArmController is a Controller over several arms run side by side
// (experiment.Group): Fire and SetProbing act on every arm at once, FireArm
// on one, and LogTail takes "ARM/ENGINE" (a bare engine name is the first
// arm's).
type ArmController interface {
	Controller
	FireArm(arm string, a fault.Action) error
}
