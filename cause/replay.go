package cause

import "p2pfault/event"

// FromWire is each pull's cause as the wire alone gives it: a run's events
// replayed, in their order, into a tracker fed the links' messages (wire
// events) and no engine line. The experiment's own causes (the samples')
// read the lines first; `report` compares the two pull by pull (Agreement)
// and, on an engine that logs neither the handshake wait nor an
// unanswered lookup (vLLM), this is what names them. Each sample comes
// back with Cause and Timer replaced, in the stream's order; a stream with
// no wire event gives nil.
func FromWire(evs []event.Event) []event.Sample {
	trackers := map[string]*Tracker{} // by arm: a group's stream has several
	var out []event.Sample
	wire := false
	for _, ev := range evs {
		switch ev.Kind {
		case event.KindRun:
			b := ev.Run.Bounds
			trackers[ev.Arm] = New(Config{AtOnce: b.FaultedMedian})
		case event.KindWire:
			if ev.T > 0 && trackers[ev.Arm] != nil {
				trackers[ev.Arm].Wire(ev.T, *ev.Wire)
			}
			wire = true
		case event.KindSamples:
			t := trackers[ev.Arm]
			if t == nil {
				continue
			}
			for _, s := range ev.Samples {
				live := s.Timer
				s.Cause, s.Timer = t.Of(s)
				s.ByWire = false
				if s.Cause == event.CausePullTimeout {
					s.Timer = live // the run's --pull-timeout, which the stream does not carry
				}
				out = append(out, s)
			}
		}
	}
	if !wire {
		return nil
	}
	return out
}

// Agreement compares the causes of two lists of the same pulls: how many
// the first's lines named (ByWire false) and how many of those agree, and
// how many of them it names by a mechanism (neither p2p nor local), and of
// those how many agree. ByWire are the pulls no line explained, which the
// run named from the wire: not compared.
type Agreement struct {
	Pulls, Agree    int
	Slow, SlowAgree int
	ByWire          int
	Disagree        map[[2]event.Cause]int // {first's, second's} → pulls
}

// Agree is the agreement of a's causes (the run's, from the lines) with
// b's (FromWire's), pull by pull; a and b are the same pulls in the same
// order.
func Agree(a, b []event.Sample) Agreement {
	g := Agreement{Disagree: map[[2]event.Cause]int{}}
	for i := range min(len(a), len(b)) {
		if a[i].ByWire {
			g.ByWire++
			continue
		}
		slow := a[i].Cause != event.CauseP2P && a[i].Cause != event.CauseLocal
		g.Pulls++
		if slow {
			g.Slow++
		}
		if a[i].Cause == b[i].Cause {
			g.Agree++
			if slow {
				g.SlowAgree++
			}
			continue
		}
		g.Disagree[[2]event.Cause{a[i].Cause, b[i].Cause}]++
	}
	return g
}
