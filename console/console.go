// Package console is the headless face of an experiment: it prints the
// run's progress (phases, engine states, faults, notable engine log lines,
// warnings, one summary line per second) as plain text for a terminal or a
// CI log. The verdict table is printed by the caller from the report.
package console

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// maxMismatchLines bounds the content mismatches printed one a line; the
// summary lines count the rest (wrong=N) and report.md lists them.
const maxMismatchLines = 10

// Printer prints events as they come. It keeps only the current second's
// samples, so its memory does not grow with the run.
type Printer struct {
	w       io.Writer
	prefix  string // e.g. "main/stall " when several runs share one output
	sources int
	states  map[string]string
	second  time.Duration // the second being accumulated
	pending []event.Sample
	content check.ContentRule // the run's content rule (from its run event)
	wrong   int               // mismatches printed so far
	// inflight is the pulls sent and not ended (pull_start events until
	// their samples), so a second's line says what hangs; failing is the
	// live checks failed as last printed.
	inflight map[int64]event.PullStart
	failing  map[string]bool
	// waits are what pulls naming each peer wait on, as the decoder's log
	// said last (wait events), by peer: a second's line names it.
	waits map[string]event.Wait
	// slow is the healthy bound (the run's HealthyMax): a pull that ends
	// later has its cause printed as it ends.
	slow time.Duration

	loads map[loadKey]bool // the loads whose running line was printed

	// Summaries turns on one summary line per second of pulls (default on).
	Summaries bool
}

// New returns a Printer writing to w, each line starting with prefix.
func New(w io.Writer, prefix string) *Printer {
	return &Printer{w: w, prefix: prefix, states: map[string]string{}, second: -1, Summaries: true,
		inflight: map[int64]event.PullStart{}, failing: map[string]bool{}, waits: map[string]event.Wait{}, loads: map[loadKey]bool{}}
}

// Run prints every event of ch until it closes.
func (p *Printer) Run(ch <-chan event.Event) {
	for ev := range ch {
		p.Print(ev)
	}
	p.flush()
}

// Print prints one event.
func (p *Printer) Print(ev event.Event) {
	switch ev.Kind {
	case event.KindRun:
		p.run(ev.T, ev.Run)
	case event.KindSchedule:
		if ev.Schedule != nil {
			p.schedule(ev.T, ev.Schedule)
		}
	case event.KindPhase:
		p.flush()
		p.line(ev.T, "phase %s", ev.Phase)
	case event.KindEngine:
		p.engine(ev.T, ev.Engine)
	case event.KindLog:
		p.line(ev.T, "%s: %s", ev.Log.Engine, ev.Log.Line)
	case event.KindFault:
		p.fault(ev.T, ev.Fault)
	case event.KindWindow:
		p.window(ev.T, ev.Window)
	case event.KindPullStart:
		if p.Summaries {
			for _, s := range ev.Pulls {
				p.inflight[s.Trial] = s
			}
		}
	case event.KindWait:
		p.wait(ev.T, ev.Wait)
	case event.KindVerdict:
		p.verdict(ev.T, ev.Verdict, ev.Final)
	case event.KindWindowVerdict:
		if ev.WindowVerdict != nil {
			p.windowVerdict(ev.T, ev.WindowVerdict)
		}
	case event.KindSamples:
		p.samples(ev.T, ev.Samples)
	case event.KindWarning:
		p.line(ev.T, "warning: %s", ev.Message)
	case event.KindVerification:
		if v := ev.Verification; v != nil {
			p.verification(ev.T, v)
		}
	case event.KindLoad:
		if l := ev.Load; l != nil {
			p.load(ev.T, l)
		}
	case event.KindAddress:
		// The first address of each source is the one the run started
		// with (the engine lines show its ports); a new one is news.
		if a := ev.Address; a != nil && a.Prev != "" {
			p.line(ev.T, "%s: pulls name %s (%s) from %s on, not %s", event.SourceName(a.Source), a.P2P, a.URL, secs(a.At), a.Prev)
		}
	case event.KindEnd:
		p.flush()
		clear(p.inflight) // the run's pulls ended or were abandoned with it
		clear(p.waits)
		if ev.Message != "" {
			p.line(ev.T, "end: %s", ev.Message)
		}
	}
}

// window says a fault window opened or closed. Print's cases that take
// more than a line are steps of their own, so that Print reads as the
// list of what is printed for each kind of event.
func (p *Printer) window(t time.Duration, w *event.Window) {
	if w.End == 0 {
		p.line(t, "fault window on %s opened", w.TargetName())
	} else {
		p.line(t, "fault window on %s closed after %s", w.TargetName(), secs(w.End-w.Start))
	}
}

// wait notes a named wait opening or closing; it is printed with its
// second's line, so a wait of a later second flushes the one before.
func (p *Printer) wait(t time.Duration, w *event.Wait) {
	if t >= p.second+time.Second {
		p.flush() // the second's line says what they waited on then
	}
	if w != nil && w.Open {
		p.waits[w.Peer] = *w
	} else if w != nil {
		delete(p.waits, w.Peer)
	}
}

// verdict prints a live verdict's checks, and with the final one the
// windows that could not be judged.
func (p *Printer) verdict(t time.Duration, v *event.Verdict, final bool) {
	if v != nil && !final {
		p.liveChecks(t, v)
	}
	if v != nil && final {
		// A window that could not be judged is no check's failure:
		// its reason is said once, with the final verdict (exit 3).
		for _, n := range v.NotJudged {
			p.line(t, "not judged: %s", n)
		}
		// A decoder's fault has no window line of its own (its window is
		// not a source's): its checks say what came of it.
		for _, c := range v.Checks {
			if check.IsDecoderCheck(c.Name) {
				p.line(t, "check %s: %s: %s", c.Name, passFail(c.Passed), c.Detail)
			}
		}
	}
}

// run prints the run's header: what is run, and its timeline.
func (p *Printer) run(t time.Duration, r *event.RunInfo) {
	p.sources = r.Sources
	p.content = check.ContentRuleOf(*r)
	p.slow = r.Bounds.HealthyMax
	mode := ""
	if event.ModeOf(r.Mode) != event.ModeP2P {
		mode = ", mode " + r.Mode
	}
	p.line(t, "run: arm %s%s, case %s, engine %s, %d sources, time scale %g, a trial every %s per source",
		r.Arm, mode, r.Case, r.Engine, r.Sources, r.TimeScale, secs(r.Interval))
	if r.Timeline != "" && r.Nemesis == "" { // a nemesis' schedule is printed from its event
		p.line(t, "timeline: %s", r.Timeline)
	}
}

// engine prints an engine's state when it changes.
func (p *Printer) engine(t time.Duration, e *event.EngineInfo) {
	if p.states[e.Name] == e.StateText() {
		return
	}
	p.states[e.Name] = e.StateText()
	detail := fmt.Sprintf("pid %d, sid %d, http :%d, p2p :%d", e.Pid, e.Sid, e.HTTPPort, e.P2PPort)
	if e.URL != "" {
		// An attached engine: what p2pfault can know of it.
		detail = fmt.Sprintf("%s, /health %s", e.URL, e.Health)
		if e.Pid != 0 {
			detail = fmt.Sprintf("pid %d, sid %d, ", e.Pid, e.Sid) + detail
		}
	}
	if e.Exit != "" {
		detail = e.Exit
	}
	p.line(t, "%s %s (%s)", e.Name, e.StateText(), detail)
}

// fault prints a fault action as it was fired.
func (p *Printer) fault(t time.Duration, f *event.FaultInfo) {
	msg := fmt.Sprintf("fault: %s %s", f.Action, f.TargetName())
	if f.Duration > 0 {
		msg += " for " + secs(f.Duration)
	}
	msg += " (" + f.By + ")"
	if f.Err != "" {
		msg += ": failed: " + f.Err
	}
	p.line(t, "%s", msg)
}

// samples prints the wrong texts of ended pulls at once and, with
// Summaries, gathers the pulls into their second's summary line.
func (p *Printer) samples(t time.Duration, ss []event.Sample) {
	for _, s := range ss {
		if p.content.Wrong(s) {
			p.mismatch(t, s)
		}
	}
	p.slowCauses(t, ss)
	if !p.Summaries {
		return
	}
	for _, s := range ss {
		delete(p.inflight, s.Trial)
		sec := s.End().Truncate(time.Second)
		if sec > p.second {
			p.flush()
			p.second = sec
		}
		p.pending = append(p.pending, s)
	}
}

// slowCauses prints the cause of the pulls of a batch that ended over the
// healthy bound, one line per source and cause (a reap ends many pulls at
// once): how many, their latencies, the timer and its value.
func (p *Printer) slowCauses(t time.Duration, ss []event.Sample) {
	if p.slow <= 0 {
		return
	}
	for _, g := range event.SlowByCause(ss, p.slow) {
		p.line(t, "slow: %s", g.Words(secs))
	}
}

// verification prints whether a fault action took effect.
func (p *Printer) verification(t time.Duration, v *event.Verification) {
	what := "took effect"
	if !v.Verified {
		what = "did NOT take effect"
	}
	p.line(t, "verified: %s %s %s after %s: %s", v.Action, v.TargetName(), what, secs(v.After), v.Detail)
}

// load prints a fault's own load: once as it runs (its first report,
// which says it really sends) and once when it stopped.
func (p *Printer) load(t time.Duration, l *event.LoadInfo) {
	what := fmt.Sprintf("%s %s: load of %d requests at once, %d-token prompts", l.Kind, event.SourceName(l.Source), l.Concurrency, l.PromptTokens)
	counts := fmt.Sprintf("%d sent, %d answered (p50 %s, max %s), %d failed", l.Sent, l.Answered, secs(l.P50), secs(l.Max), l.Failed)
	if l.LastErr != "" {
		counts += " (last: " + l.LastErr + ")"
	}
	key := loadKey{source: l.Source, start: l.Start}
	switch {
	case l.Final:
		p.line(t, "%s stopped at %s: %s, %d in flight cancelled", what, secs(l.End), counts, l.Cancelled)
	case !p.loads[key]:
		p.loads[key] = true
		p.line(t, "%s running: %s so far", what, counts)
	}
}

// loadKey names one load: its source and start.
type loadKey struct {
	source int
	start  time.Duration
}

// schedule prints a nemesis' schedule: its seed and settings, then one
// line per fault. A scripted one is the run event's timeline line.
func (p *Printer) schedule(t time.Duration, s *event.ScheduleInfo) {
	if s.Nemesis == "" {
		return
	}
	srcs := make([]string, len(s.Sources))
	for i, src := range s.Sources {
		srcs[i] = event.SourceName(src)
	}
	p.line(t, "schedule: nemesis %s, seed %d: %d faults from %s on %s, gap %s ± %s, length %s ± %s, a kill %s, at most %d at a time",
		s.Nemesis, s.Seed, len(s.Steps), strings.Join(s.Kinds, ", "), strings.Join(srcs, ", "),
		secs(s.Gap), secs(s.GapSpread), secs(s.Length), secs(s.LengthSpread), secs(s.Settle), s.AtOnce)
	for _, f := range s.Steps {
		what := f.Action
		if f.Arg != "" {
			what += " " + f.Arg
		}
		line := fmt.Sprintf("schedule:   at %s %s %s", secs(f.At), what, f.TargetName())
		if f.For > 0 {
			line += " for " + secs(f.For)
		}
		p.line(t, "%s", line)
	}
}

// windowVerdict prints a fault window's verdict once it is settled: a
// soak's log says fault by fault how each went.
func (p *Printer) windowVerdict(t time.Duration, w *event.WindowVerdict) {
	head := fmt.Sprintf("window %d: %s %s at %s for %s", w.Index, w.Kind, event.SourceName(w.Source), secs(w.Start), secs(w.End-w.Start))
	times := fmt.Sprintf("detect %s, recover %s", fmtTime(w.Times.DetectS), fmtTime(w.Times.RecoverS))
	if w.Passed {
		p.line(t, "%s: pass (%s)", head, times)
		return
	}
	if w.NotJudged != "" {
		p.line(t, "%s: not judged: %s", head, w.NotJudged)
		return
	}
	var failed []string
	for _, c := range w.Checks {
		if !c.Passed {
			failed = append(failed, c.Name+": "+c.Detail)
		}
	}
	p.line(t, "%s: FAIL (%s): %s", head, times, strings.Join(failed, "; "))
}

func fmtTime(s *float64) string {
	if s == nil {
		return "–"
	}
	return fmt.Sprintf("%.2fs", *s)
}

// liveChecks prints a live check the moment it fails (pulls still in
// flight past its bound fail it before any of them returned, and its
// detail says so), and when it holds again; an empty one is not news.
func (p *Printer) liveChecks(t time.Duration, v *event.Verdict) {
	for _, c := range v.Checks {
		failed := !c.Passed && !c.Empty
		switch {
		case failed && !p.failing[c.Name]:
			p.line(t, "check %s FAILED: %s", c.Name, c.Detail)
		case !failed && p.failing[c.Name]:
			p.line(t, "check %s holds again: %s", c.Name, c.Detail)
		}
		p.failing[c.Name] = failed
	}
}

// flush prints the summary line of the second being accumulated, with the
// pulls in flight at its end.
func (p *Printer) flush() {
	if len(p.pending) == 0 {
		return
	}
	at := p.second + time.Second
	by := map[int][]event.Sample{}
	var idx []int
	for _, s := range p.pending {
		if _, ok := by[s.Source]; !ok {
			idx = append(idx, s.Source)
		}
		by[s.Source] = append(by[s.Source], s)
	}
	hung := map[int]int{}
	oldest := map[int]time.Duration{}
	for _, s := range p.inflight {
		if s.Start >= at {
			continue
		}
		if _, ok := by[s.Source]; !ok && hung[s.Source] == 0 {
			idx = append(idx, s.Source)
		}
		hung[s.Source]++
		oldest[s.Source] = max(oldest[s.Source], at-s.Start)
	}
	sort.Ints(idx)
	parts := make([]string, 0, len(idx))
	for _, i := range idx {
		part := summarise(i, by[i], p.content)
		if n := hung[i]; n > 0 {
			part += fmt.Sprintf(" in-flight=%d oldest=%s", n, secs(oldest[i]))
		}
		parts = append(parts, part)
	}
	p.line(at, "%s", strings.Join(parts, " | "))
	p.waitLines(at)
	p.pending = p.pending[:0]
}

// waitLines print, under a second's line, what the pulls in flight then
// wait on where the decoder's log said it: one line per peer with a wait
// open, "◆ in flight 18: handshake with 127.0.0.1:7777 since 22.0 s
// (deadline 30 s)".
func (p *Printer) waitLines(at time.Duration) {
	if len(p.waits) == 0 {
		return
	}
	n := map[string]int{}
	for _, s := range p.inflight {
		if w, ok := p.waits[s.Peer]; ok && w.Holds(s.Start, at) {
			n[s.Peer]++
		}
	}
	peers := make([]string, 0, len(p.waits))
	for peer := range p.waits {
		peers = append(peers, peer)
	}
	sort.Strings(peers)
	for _, peer := range peers {
		if n[peer] > 0 {
			p.line(at, "◆ %s", p.waits[peer].InFlightWords(n[peer]))
		}
	}
}

// mismatch prints a pull that answered other text than its source.
func (p *Printer) mismatch(t time.Duration, s event.Sample) {
	p.wrong++
	switch {
	case p.wrong <= maxMismatchLines:
		p.line(t, "content: pull of %s sent at %.2fs (trial %d, cached %d) returned %s, the source's completion is %s",
			event.SourceName(s.Source), s.Start.Seconds(), s.Trial, s.CachedTokens, check.QuoteText(s.PullText), check.QuoteText(s.SourceText))
	case p.wrong == maxMismatchLines+1:
		p.line(t, "content: more pulls returned other text than the source's; the summary lines count them (wrong=N), report.md lists them")
	}
}

// summarise renders one source's pulls of one second.
func summarise(source int, ss []event.Sample, content check.ContentRule) string {
	if len(ss) == 0 {
		return fmt.Sprintf("%s n=0", event.SourceName(source))
	}
	lat := make([]time.Duration, len(ss))
	hits, errs, wrong := 0, 0, 0
	for i, s := range ss {
		lat[i] = s.Latency
		if s.Hit() {
			hits++
		}
		if s.Status != 200 {
			errs++
		}
		if content.Wrong(s) {
			wrong++
		}
	}
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	out := fmt.Sprintf("%s n=%d hit=%d p50=%s max=%s", event.SourceName(source), len(ss), hits, secs(lat[(len(lat)-1)/2]), secs(lat[len(lat)-1]))
	if errs > 0 {
		out += fmt.Sprintf(" non-200=%d", errs)
	}
	if wrong > 0 {
		out += fmt.Sprintf(" wrong=%d", wrong)
	}
	return out
}

func (p *Printer) line(t time.Duration, format string, args ...any) {
	fmt.Fprintf(p.w, "%s[%7.2fs] %s\n", p.prefix, t.Seconds(), fmt.Sprintf(format, args...))
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}
