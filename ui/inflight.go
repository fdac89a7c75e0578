package ui

import (
	"fmt"
	"time"

	"p2pfault/event"
	"p2pfault/probe"
)

// inflightLine is a source panel's line of pulls sent and not ended: the
// moment a stalled source's pulls hang is the moment the finished-pull
// figures go blind, so the panel says how many hang and for how long.
// None for a stream that does not tell pulls' starts.
type inflightLine struct {
	shown  bool // the stream tells pulls' starts
	n      int
	oldest time.Duration
	// wait is what they wait on when the decoder's log says it (nil: it
	// does not): the line names it instead of the oldest's age.
	wait *event.Wait
}

func (l inflightLine) lines(s *Styles) []string {
	if !l.shown {
		return nil
	}
	if l.n == 0 {
		return []string{s.Dim.Render("in flight 0")}
	}
	text := fmt.Sprintf("in flight %d, oldest %.1fs", l.n, l.oldest.Seconds())
	if l.wait != nil {
		text = l.wait.InFlightWords(l.n)
	}
	return []string{s.ChartInflight.Render(string(inflightRune)) + " " + s.Label.Render(text)}
}

// pending is the in-flight pulls of every source at nowT, by source.
func (st *state) pending(nowT time.Duration) map[int]probe.Pending {
	if st.inflight.Len() == 0 {
		return nil
	}
	out := map[int]probe.Pending{}
	for _, p := range st.inflight.Snapshot(nowT) {
		out[p.Source] = p
	}
	return out
}

// inflightLineOf is source i's in-flight line from its pulls in flight:
// when the decoder's log said what the pulls naming its peer wait on, the
// wait and how many of them hold it (event.Wait.Holds).
func (st *state) inflightLineOf(i int, pend probe.Pending, nowT time.Duration) inflightLine {
	l := inflightLine{shown: st.sawStarts, n: pend.N, oldest: pend.Oldest}
	w, ok := st.waits[st.peers[i]]
	if !ok {
		return l
	}
	n := 0
	for _, s := range pend.Starts {
		if w.Holds(s, nowT) {
			n++
		}
	}
	if n > 0 {
		l.n, l.wait = n, &w
	}
	return l
}

// inflightCount is how many pulls naming source i are in flight.
func (st *state) inflightCount(i int, nowT time.Duration) int {
	return st.pending(nowT)[i].N
}
