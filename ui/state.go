package ui

import (
	"fmt"
	"sort"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/probe"
)

// maxSources bounds how many source panels a (possibly malformed) event
// stream can make the dashboard allocate.
const maxSources = 64

// point is one finished pull, kept compact because each source's ring holds
// a whole chart window of them.
type point struct {
	end     time.Duration // since t0
	latency time.Duration
	hit     bool
	ok      bool          // HTTP 200 and no transport error
	ttft    time.Duration // streamed pulls: time to first token (0 = none)
	wrong   bool          // another text than the source's (check content_matches)
	rank    int           // the data-parallel rank the pull was pinned to
	decoder int           // the decoder it went through (--decoders)
}

// start is when the pull was sent: the chart plots it there.
func (p point) start() time.Duration { return p.end - p.latency }

// span is a fault window on a source, marked on its chart.
type span struct {
	start, end time.Duration
	open       bool
	// causes counts the pulls naming the source started in the window by
	// what ended them (the samples' causes); nil until one carries a cause
	// (a pointer: spans stay comparable).
	causes *causeTally
	// recovers: the window has a recovery window after it (stall, kill),
	// whose pulls after counts by cause, as the report's why table does
	// (sent "after"); nil until one of them carries a cause.
	recovers bool
	after    *causeTally
}

// causeTally is a window's pulls by cause.
type causeTally struct{ n map[event.Cause]int }

// holds reports whether a pull started at t is in the window.
func (sp *span) holds(t time.Duration) bool {
	return t >= sp.start && (sp.open || t < sp.end)
}

// followedBy reports whether a pull started at t is in the recovery
// window of length rec after the closed window, [end, end+rec).
func (sp *span) followedBy(t, rec time.Duration) bool {
	return sp.recovers && !sp.open && t >= sp.end && t < sp.end+rec
}

// count adds c to the tally at *tp, made on the first.
func count(tp **causeTally, c event.Cause) {
	if *tp == nil {
		*tp = &causeTally{n: map[event.Cause]int{}}
	}
	(*tp).n[c]++
}

// sourceState is what the dashboard knows of one source.
type sourceState struct {
	index  int
	points ring[point]
	spans  ring[span]

	// Counts over the whole run: O(1) memory however long it lasts.
	n, ok200, errs, pulled int64
	wrong                  int64 // pulls that returned other text than the source's

	// cond is the source's condition as the experiment last sent it (nil
	// before the first): the badge shows it, the keys are refused by it.
	cond *event.ConditionInfo
}

func (s *sourceState) openSpan() *span {
	if s.spans.Len() == 0 {
		return nil
	}
	i := (s.spans.head + s.spans.n - 1) % len(s.spans.buf)
	if !s.spans.buf[i].open {
		return nil
	}
	return &s.spans.buf[i]
}

func (s *sourceState) lastSpan() *span {
	if s.spans.Len() == 0 {
		return nil
	}
	return &s.spans.buf[(s.spans.head+s.spans.n-1)%len(s.spans.buf)]
}

// engineState is one engine's latest process state and its last log lines.
type engineState struct {
	info      event.EngineInfo
	logs      ring[string]
	everReady bool
	reported  bool // a KindEngine event named it (not only a log line)
	// cond is a decoder's condition (its fault in force), which the
	// process table shows as its badge; a source's is on its panel.
	cond *event.ConditionInfo
}

// logLevel tells the event log how to style an entry.
type logLevel int

const (
	levelInfo logLevel = iota
	levelFault
	levelWarn
	levelError
)

// logEntry is one line of the dashboard's event log.
type logEntry struct {
	at    time.Duration // since t0
	level logLevel
	text  string
}

// state is everything the dashboard derived from the run's events. The
// Model owns it; panels only read it.
type state struct {
	run      *event.RunInfo
	phase    event.Phase
	sources  []*sourceState
	engines  map[string]*engineState
	log      ring[logEntry]
	verdict  *event.Verdict
	final    bool
	probing  bool
	outRange int64 // samples naming a source index out of range, dropped

	// anchor maps wall time to run time (since t0): the latest event's
	// (T, Wall), so the clock keeps moving between events.
	anchorT    time.Duration
	anchorWall time.Time
	firstWall  time.Time
	latestT    time.Duration

	ended    bool
	endSeen  bool // the run's end event came (not only the stream's close)
	endMsg   string
	exitCode int
	endT     time.Duration
	endWall  time.Time

	startFailed bool
	failures    []string // warnings and the end message seen before the cluster was up

	maxPoints int

	// inflight is the pulls sent and not ended (pull_start events, ended
	// by their samples); sawStarts says the stream tells pulls' starts,
	// so the panels keep a line for them.
	inflight  *probe.InFlight
	sawStarts bool
	// peers are the P2P address each source's pulls name now (address
	// events), waits what the pulls naming a peer wait on as the decoder's
	// log says (wait events): the source panel's in-flight line names it.
	peers map[int]string
	waits map[string]event.Wait
	// metrics is each engine's latest /metrics reading (metrics events).
	metrics map[string]event.MetricsInfo
	// links are each source's link counts, by its name (link events,
	// link.go): none on a run without links.
	links map[string]event.LinkCounts
	// lookup is the decoder's lookup delay per fault window and the
	// baseline before the first (lookupwin.go).
	lookup lookupWindows
	// content is the run's content rule (its run event); wrongLogged
	// counts the mismatches the event log told one a line.
	content     check.ContentRule
	wrongLogged int
	// schedule is the run's fault schedule (its schedule event), in time
	// order: the header counts down to its next step.
	schedule []event.ScheduledFault
	// windows are the fault windows judged fault by fault (window_verdict
	// events and the live verdicts' unsettled ones), by index, at most
	// maxWindowRows; kinds the latest verdict's per-kind summary.
	windows []event.WindowVerdict
	kinds   []event.KindSummary
}

// maxWrongLogged bounds the mismatches the event log tells one a line: the
// source panels count them all (wrong N).
const maxWrongLogged = 10

func newState(maxPoints, logLines int) *state {
	return &state{
		inflight:  probe.NewInFlight(),
		peers:     map[int]string{},
		waits:     map[string]event.Wait{},
		metrics:   make(map[string]event.MetricsInfo),
		links:     map[string]event.LinkCounts{},
		engines:   make(map[string]*engineState),
		log:       newRing[logEntry](logLines),
		probing:   true,
		maxPoints: maxPoints,
	}
}

// nowT is the run time (since t0) at wall time now. It stops at the end of
// the run so the final charts stay on screen.
func (st *state) nowT(now time.Time) time.Duration {
	if st.ended {
		return st.endT
	}
	if st.anchorWall.IsZero() {
		return st.anchorT
	}
	return st.anchorT + now.Sub(st.anchorWall)
}

// elapsed is the wall time since the run started, stopped at its end.
func (st *state) elapsed(now time.Time) time.Duration {
	start := st.firstWall
	if st.run != nil && !st.run.Started.IsZero() {
		start = st.run.Started
	}
	if start.IsZero() {
		return 0
	}
	if st.ended && !st.endWall.IsZero() {
		now = st.endWall
	}
	return now.Sub(start)
}

// up reports whether the cluster got past start-up: the run entered
// warm-up or a later phase, or every engine the run needs was ready.
func (st *state) up() bool {
	switch st.phase {
	case "", event.PhaseStarting:
	default:
		return true
	}
	if st.run == nil {
		return false
	}
	ready := 0
	for _, e := range st.engines {
		if e.everReady {
			ready++
		}
	}
	return ready >= st.run.Sources+1
}

func (st *state) timeScale() float64 {
	if st.run == nil {
		return event.DefaultTimeScale
	}
	return event.TimeScaleOf(st.run.TimeScale)
}

func (st *state) addLog(at time.Duration, level logLevel, format string, args ...any) {
	st.log.Push(logEntry{at: at, level: level, text: clean(fmt.Sprintf(format, args...))})
}

// source returns the state of source i, creating it (and those before it)
// on first sight; nil when i is out of range.
func (st *state) source(i int) *sourceState {
	if i < 0 || i >= maxSources {
		return nil
	}
	for len(st.sources) <= i {
		st.sources = append(st.sources, &sourceState{
			index:  len(st.sources),
			points: newRing[point](st.maxPoints),
			spans:  newRing[span](32),
		})
	}
	return st.sources[i]
}

// engineOrder lists engines as the process table shows them: sources by
// index, then the decoders by index and anything else by name.
func (st *state) engineOrder() []*engineState {
	out := make([]*engineState, 0, len(st.engines))
	for _, e := range st.engines {
		if e.reported {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		ea, eb := out[a].info, out[b].info
		sa, sb := ea.Role == event.RoleSource, eb.Role == event.RoleSource
		if sa != sb {
			return sa
		}
		if ea.Role == eb.Role && ea.Index != eb.Index {
			return ea.Index < eb.Index // decoder-2 before decoder-10
		}
		return ea.Name < eb.Name
	})
	return out
}
