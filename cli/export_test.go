package cli

import (
	"testing"
	"time"

	"p2pfault/doctor"

	"p2pfault/event"
)

// OpenReplay opens what `p2pfault replay ARG` would play, without the
// dashboard: the events and the engines' logs as they stood at an instant
// (engine "ARM/ENGINE" with several arms).
func OpenReplay(arg string) ([]event.Event, func(engine string, n int, at time.Time) []string, error) {
	path, err := eventsArg("replay", arg)
	if err != nil {
		return nil, nil, err
	}
	cfg, closeFile, err := openReplay(path, false)
	if err != nil {
		return nil, nil, err
	}
	closeFile()
	return cfg.Events, cfg.LogTail, nil
}

// HideHostOrphans makes the doctor's leftovers check see no orphan until
// t ends: the host's own are another test's business (the check itself is
// tested on orphans a test made, TestOrphansOfTwoKilledPartitionRunsAreUndone).
func HideHostOrphans(t *testing.T) {
	t.Cleanup(func() { doctorHost = doctor.System })
	doctorHost = func() doctor.Host {
		h := doctor.System()
		h.Orphans = func() ([]string, error) { return nil, nil }
		return h
	}
}
