package experiment

// SubscriberBuffer is what a subscription's channel holds, for the tests
// of a face that stops reading: they must read past it.
const SubscriberBuffer = subscriberBuffer

// KeptSamples is how many samples the decoder checks hold.
func (e *Experiment) KeptSamples() int { return e.verdicts.keptSamples() }

// KeptParked is how many parked-store readings the parked check holds.
func (e *Experiment) KeptParked() int { return e.verdicts.keptParked() }
