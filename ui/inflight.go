package ui

import (
	"fmt"
	"strings"
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
	// does not): the line names it after the oldest's age.
	wait *event.Wait
	now  time.Duration // the frame's time since t0: the wait's deadline counts down from it
}

// lines are "◆ in flight 24, oldest 11.8s" and, with a wait, ": handshake
// with 127.0.0.1:7777, deadline in 18.2s" after it on one line when it
// fits in w columns. The age is the oldest pull's, not when the wait
// began, and the deadline is time left, so neither reads as the other.
// Where the whole does not fit the address goes first (the panel is the
// source's already), then the wait moves to a line of its own, so an
// 80-column dashboard's half-width panel shows every figure whole.
func (l inflightLine) lines(s *Styles, w int) []string {
	if !l.shown {
		return nil
	}
	if l.n == 0 {
		return []string{s.Dim.Render("in flight 0")}
	}
	const mark = 2 // "◆ "
	head := fmt.Sprintf("in flight %d, oldest %.1fs", l.n, l.oldest.Seconds())
	first := func(text string) string {
		return s.ChartInflight.Render(string(inflightRune)) + " " + s.Label.Render(text)
	}
	if l.wait == nil {
		return []string{first(head)}
	}
	full, bare := l.waitText(true), l.waitText(false)
	for _, tail := range []string{full, bare} {
		if text := head + ": " + tail; mark+textWidth(text) <= w {
			return []string{first(text)}
		}
	}
	tail := full
	if mark+textWidth(full) > w {
		tail = bare
	}
	return []string{first(head), strings.Repeat(" ", mark) + s.Label.Render(tail)}
}

// waitText is the wait and its deadline as time left, with the peer's
// address or without: "handshake with 127.0.0.1:7777, deadline in
// 18.2s"; once the deadline is behind, "deadline passed 1.0s ago".
func (l inflightLine) waitText(addr bool) string {
	text := l.wait.Words()
	if addr {
		text += " with " + l.wait.Peer
	}
	at, ok := l.wait.Deadline()
	switch left := (at - l.now).Round(100 * time.Millisecond); {
	case !ok:
	case left >= 0:
		text += fmt.Sprintf(", deadline in %.1fs", left.Seconds())
	default:
		text += fmt.Sprintf(", deadline passed %.1fs ago", (-left).Seconds())
	}
	return text
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
	l := inflightLine{shown: st.sawStarts, n: pend.N, oldest: pend.Oldest, now: nowT}
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
