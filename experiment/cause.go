package experiment

import (
	"time"

	"p2pfault/cause"
	"p2pfault/event"
)

// The cause of every pull (package cause) is computed here, once, as its
// sample is sent: the tracker is fed every engine line as the engine
// prints it, and a sample's cause travels on the sample event, which every
// face renders.

// forgetAfter is how long a line is kept past the pull timeout: a store
// reaped unbound (60 s at vLLM's default) may explain a fetch that comes
// later still.
const forgetAfter = 3 * time.Minute

func (e *Experiment) newCauses() *cause.Tracker {
	b := e.cfg.Bounds.Scaled(e.cfg.TimeScale)
	return cause.New(cause.Config{AtOnce: b.FaultedMedian, PullTimeout: e.cfg.scale(e.cfg.PullTimeout)})
}

// noteLine hands an engine's line to the tracker, stamped with when it was
// read, and sends the wait a decoder's line begins or ends (cause.WaitOf),
// which the faces pair with the pulls in flight. Lines before t0 explain
// no measured pull; the engaged gate (gate.go) reads them.
func (e *Experiment) noteLine(engine, line string) {
	e.mu.Lock()
	if e.cluster == nil {
		e.mu.Unlock()
		return
	}
	if e.decoderName == "" {
		e.decoderName = e.cluster.Decoder().Name()
	}
	decoder := engine == e.decoderName
	e.engaged.Log(decoder, line) // the warm-up's lines too: the gate reads them
	if e.t0.IsZero() {
		e.mu.Unlock()
		return
	}
	at := time.Since(e.t0)
	e.causes.Log(at, decoder, line)
	e.mu.Unlock()
	if !decoder {
		return
	}
	if w, ok := cause.WaitOf(at, line); ok {
		e.emit(event.Event{Kind: event.KindWait, Wait: &w})
	}
}

// attribute sets the cause of each sample in batch and returns those to
// send now and those to hold for the next batch: a pull that did not hit
// and ended within cause.Skew may be explained by a line still on its way
// (final sends everything).
func (e *Experiment) attribute(batch []event.Sample, now time.Duration, final bool) (send, hold []event.Sample) {
	for _, s := range batch {
		if !final && !s.Hit() && !s.Aborted && now-s.End() < cause.Skew {
			hold = append(hold, s)
			continue
		}
		s.Cause, s.Timer = e.causes.Of(s)
		send = append(send, s)
	}
	e.causes.Forget(now - e.cfg.scale(e.cfg.PullTimeout) - forgetAfter)
	return send, hold
}
