package experiment

import (
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
)

// stream is the run's sample stream between the probe and the bus: the
// samples ended and the pulls started since the last batch. Its lock
// guards the two queues only; batches are sent after it is let go.
type stream struct {
	mu      sync.Mutex
	pending []event.Sample
	starts  []event.PullStart // pulls sent since the last batch (KindPullStart)
}

func (s *stream) started(p event.PullStart) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts = append(s.starts, p)
}

func (s *stream) ended(sm event.Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, sm)
}

// take empties the queues and returns what they held.
func (s *stream) take() ([]event.Sample, []event.PullStart) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch, starts := s.pending, s.starts
	s.pending, s.starts = nil, nil
	return batch, starts
}

// hold puts samples back for the next batch, ahead of those ended since.
func (s *stream) hold(samples []event.Sample) {
	if len(samples) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(samples, s.pending...)
}

// collect gives every sample to the judge and queues it for the next
// batch event, until the probe is done and out is drained.
func (e *Experiment) collect(out <-chan event.Sample, probeDone <-chan struct{}) {
	keep := func(s event.Sample) {
		e.verdicts.ended(s)
		e.stream.ended(s)
	}
	for {
		select {
		case s := <-out:
			keep(s)
		case <-probeDone:
			// Run has returned: nothing more is sent, take what is queued.
			for {
				select {
				case s := <-out:
					keep(s)
				default:
					return
				}
			}
		}
	}
}

// flushLoop sends the queued samples as one event every 100 ms (faces
// redraw per batch, not per request) and the live verdict once a second,
// and at once when a pull in flight has just broken a bound
// (check.Crossed): a check never shows green for a second after a hanging
// pull has failed it.
func (e *Experiment) flushLoop(done <-chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for {
		select {
		case <-tick.C:
			e.flushSamples(false)
			e.advance()
			if n++; n%10 == 0 || e.pendingCrossed() {
				e.emitLiveVerdict()
			}
		case <-done:
			e.flushSamples(true)
			return
		}
	}
}

// flushSamples sends the pulls started and the samples ended since the
// last batch; a sample whose cause may still come is held for the next
// (attribute). Only flushLoop calls it, so batches never overlap.
func (e *Experiment) flushSamples(final bool) {
	now := e.run.since()
	batch, starts := e.stream.take()
	batch, hold := e.attribute(batch, now, final)
	e.stream.hold(hold)
	// Starts go first: a pull that started and ended within one batch is
	// then seen to start before it ends.
	if len(starts) > 0 {
		e.emit(event.Event{Kind: event.KindPullStart, Pulls: starts})
	}
	if len(batch) > 0 {
		e.emit(event.Event{Kind: event.KindSamples, Samples: batch})
	}
}

// emit stamps ev (sequence, time, arm: the envelope every event carries)
// and hands it to every subscriber, in order. It holds no lock of the
// experiment's while the bus sends (bus).
func (e *Experiment) emit(ev event.Event) {
	if ev.Kind == event.KindMetrics && !e.run.t0().IsZero() && ev.Metrics != nil {
		e.verdicts.noteParked(ev.Metrics.Engine, e.run.since(), ev.Metrics.Reading)
	}
	if ev.Kind == event.KindMetrics && e.run.t0().IsZero() {
		// Before t0, the decoder's scrapes are the engaged gate's evidence
		// (only a warm-up that fails reads them, and it never has a t0).
		if cl := e.run.cluster(); cl != nil {
			e.evidence.noteWarmReading(ev.Metrics, cl.Decoder().Name())
		}
	}
	e.emitIf(func() (event.Event, bool) { return ev, true })
}

// emitIf sends the event next makes, if it makes one, made under the
// bus's lock: what next reads is sent in the order it was read.
func (e *Experiment) emitIf(next func() (event.Event, bool)) {
	e.bus.publish(func() (event.Event, time.Time, bool) {
		ev, ok := next()
		ev.Arm = e.cfg.Arm
		return ev, e.run.t0(), ok // the bus stamps sequence and time: one order for every arm
	})
}

func (e *Experiment) emitEnd(err error) {
	ev := event.Event{Kind: event.KindEnd, ExitCode: exitcode.Code(err), Message: "run complete"}
	if err != nil {
		ev.Message = err.Error()
	}
	e.emit(ev)
}

// closeSubs ends this arm's part of the stream; the bus closes it once
// every arm sharing it has ended.
func (e *Experiment) closeSubs() { e.bus.leave() }
