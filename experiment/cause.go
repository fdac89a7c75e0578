package experiment

import (
	"sync"
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

// evidence is what the engines' lines and the warm-up's scrapes told:
// the tracker that names each pull's cause (causes; decoderNames are the
// engines whose reaps bear on the pulls), the decoder's lines on its
// sessions from the start (engaged), and its first and latest scrape
// before t0 (warmFirst, warmLast): the engaged gate's evidence (gate.go).
// Its lock guards these and is never held across a send.
type evidence struct {
	mu                  sync.Mutex
	causes              *cause.Tracker
	decoderNames        map[string]bool
	engaged             *cause.Engagement
	warmFirst, warmLast *event.Reading
}

func (e *Experiment) newEvidence() *evidence {
	b := e.cfg.Bounds.Scaled(e.cfg.TimeScale)
	return &evidence{
		causes:  cause.New(cause.Config{AtOnce: b.FaultedMedian, PullTimeout: e.cfg.scale(e.cfg.PullTimeout)}),
		engaged: cause.NewEngagement(),
	}
}

// noteLine hands an engine's line to the tracker, stamped with when it was
// read, and sends the wait a decoder's line begins or ends (cause.WaitOf),
// which the faces pair with the pulls in flight. Lines before t0 explain
// no measured pull; the engaged gate (gate.go) reads them.
func (e *Experiment) noteLine(engine, line string) {
	cl := e.run.cluster()
	if cl == nil {
		return
	}
	t0 := e.run.t0()
	ev := e.evidence
	ev.mu.Lock()
	if ev.decoderNames == nil {
		ev.decoderNames = map[string]bool{}
		for _, d := range decodersOf(cl) {
			ev.decoderNames[d.Name()] = true
		}
	}
	decoder := ev.decoderNames[engine]
	ev.engaged.Log(decoder, line) // the warm-up's lines too: the gate reads them
	if t0.IsZero() {
		ev.mu.Unlock()
		return
	}
	at := time.Since(t0)
	ev.causes.Log(at, decoder, line)
	ev.mu.Unlock()
	if !decoder {
		return
	}
	if w, ok := cause.WaitOf(at, line); ok {
		e.emit(event.Event{Kind: event.KindWait, Wait: &w})
	}
}

// noteWire hands a message through a link to the tracker and sends it
// as a wire event (the trace as evidence). Messages before t0 (the
// warm-up's handshakes) are sent but explain no measured pull.
func (e *Experiment) noteWire(w event.WireMsg) {
	if t0 := e.run.t0(); !t0.IsZero() {
		ev := e.evidence
		ev.mu.Lock()
		ev.causes.Wire(time.Since(t0), w)
		ev.mu.Unlock()
	}
	e.emit(event.Event{Kind: event.KindWire, Wire: &w})
}

// attribute sets the cause of each sample in batch and returns those to
// send now and those to hold for the next batch: a pull that did not hit
// and ended within cause.Skew may be explained by a line still on its way
// (final sends everything).
func (e *Experiment) attribute(batch []event.Sample, now time.Duration, final bool) (send, hold []event.Sample) {
	ev := e.evidence
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, s := range batch {
		if !final && !s.Hit() && !s.Aborted && now-s.End() < cause.Skew {
			hold = append(hold, s)
			continue
		}
		s.Cause, s.Timer, s.ByWire = ev.causes.Attribute(s)
		send = append(send, s)
	}
	ev.causes.Forget(now - e.cfg.scale(e.cfg.PullTimeout) - forgetAfter)
	return send, hold
}
