package report

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/scrape"
)

// Run is one finished (or crashed) run, as its events tell it.
type Run struct {
	Info event.RunInfo

	// Window is the fault window the checks look at: the scripted
	// fault's, or the latest one of a run without a timeline (faults from
	// keys). HasWindow is false for a run without a fault (case none).
	Window    event.Window
	HasWindow bool
	// Windows is every fault window of the run, closed; the timeline
	// shades them all.
	Windows []event.Window

	Samples []event.Sample
	RunEnd  time.Duration // when the probe stopped sending, since t0

	// Verifications are the fault actions checked on the host, in order.
	Verifications []event.Verification
	// Loads are the fault kinds' own loads (busy), each its last report.
	Loads []event.LoadInfo
	// Metrics are each engine's scrapes of /metrics, by engine name, in
	// time order (T since t0).
	Metrics map[string][]scrape.Point

	Verdict event.Verdict
	// Recomputed says the events held no final verdict (the run crashed
	// before its checks) and Verdict was computed here from the samples.
	Recomputed bool
	// Truncated says the events ended without an end event or with a
	// partial line: the run crashed or is still running.
	Truncated bool

	First, Last time.Time // wall clock of the first and the last event
	// T0 is the wall clock of the run's t0 (an event's Wall less its T),
	// zero when no event came after t0.
	T0         time.Time
	EndMessage string // why the run ended, from its end event
	ExitCode   int

	// wireWhy and wireAgreement are the causes from the wire (wire.go);
	// ladders the slowest pulls' messages (ladder.go). Empty without a link.
	wireWhy       []WhyRow
	wireAgreement *WireAgreement
	ladders       []Ladder

	// html holds what only report.html shows (html_facts.go).
	html htmlFacts
}

// Wall is the real time the run took, first event to last.
func (r Run) Wall() time.Duration {
	if r.First.IsZero() || r.Last.Before(r.First) {
		return 0
	}
	return r.Last.Sub(r.First)
}

// Name is "arm/case" ("arm/pd/case" for a row of mode pd), the run's name
// in JUnit and in messages.
func (r Run) Name() string {
	return runTitle(r.Info.Arm, r.Info.Mode, r.Info.Case, "/") + settingsSuffix(r.Info.Settings, " ")
}

// FromEvents rebuilds a run from one arm's events (as ByArm splits them).
// The verdict is the final verdict event's when there is one; otherwise the
// checks are evaluated here over the samples, so a crashed run still gets
// one. A fault window still open when the events stop is closed at the run
// end. Truncated is set when there is no end event; a cut last line only
// ReadEvents sees, so Rebuild adds its verdict.
func FromEvents(events []event.Event) (Run, error) {
	var in intake
	for i, ev := range events {
		if err := in.take(i, ev); err != nil {
			return Run{}, err
		}
	}
	if !in.haveRun {
		return Run{}, fmt.Errorf("no run event among %d events: not a p2pfault events log", len(events))
	}
	r := in.r
	// The run ends at its phase "done", or for a crashed run at its last
	// event; capped at the planned duration, past which the probe never
	// sends (done and end come later, once in-flight pulls drained).
	r.RunEnd = in.doneAt
	if !in.haveDone && len(events) > 0 {
		r.RunEnd = events[len(events)-1].T
	}
	if r.Info.Duration > 0 && r.RunEnd > r.Info.Duration {
		r.RunEnd = r.Info.Duration
	}
	r.RunEnd = max(r.RunEnd, 0)
	r.Truncated = !in.sawEnd
	// The judge takes a window still open at the end as open, as the
	// experiment did; the charts draw it to the run's end.
	judged := slices.Clone(r.Windows)
	for _, i := range in.open {
		r.Windows[i].End = max(r.RunEnd, r.Windows[i].Start)
	}
	// The checks look at the window the experiment judged (check.Judged).
	r.Window, r.HasWindow = check.Judged(r.Windows, r.Info.Timeline != "")

	// The same judge as the experiment's, fed the whole run at once: every
	// window on its own, the run on the judged one (or on all of them).
	computed, _ := check.JudgeRun(check.RunFacts{
		Setup: check.Setup{Bounds: r.Info.Bounds, Sources: r.Info.Sources, Ranks: r.Info.SourceRanks, Decoders: r.Info.Decoders, Scripted: r.Info.Timeline != "",
			Content: check.ContentRuleOf(r.Info)},
		Windows: judged, Samples: r.Samples, Pending: r.pending(), Verifications: r.Verifications,
		Now: max(r.html.lastT, r.RunEnd), RunEnd: r.RunEnd,
	})
	r.wireWhy, r.wireAgreement = wireFacts(r, events)
	r.ladders = Ladders(r, events, htmlLadders)
	if in.final == nil {
		r.Verdict, r.Recomputed = computed, true
		return r, nil
	}
	r.Verdict = withComputed(*in.final, computed)
	return r, nil
}

// intake is a run as FromEvents reads it, event by event.
type intake struct {
	r        Run
	haveRun  bool
	doneAt   time.Duration
	haveDone bool
	final    *event.Verdict
	open     []int // indexes into r.Windows of windows not closed yet
	sawEnd   bool
}

// take reads the i-th event; an error names a malformed one.
func (in *intake) take(i int, ev event.Event) error {
	r := &in.r
	r.html.add(ev)
	if i == 0 {
		r.First = ev.Wall
	}
	if ev.Wall.After(r.Last) {
		r.Last = ev.Wall
	}
	if r.T0.IsZero() && ev.T > 0 && !ev.Wall.IsZero() {
		r.T0 = ev.Wall.Add(-ev.T)
	}
	switch ev.Kind {
	case event.KindRun:
		if ev.Run == nil {
			return fmt.Errorf("event %d (seq %d): run event without run info", i+1, ev.Seq)
		}
		if in.haveRun {
			return fmt.Errorf("event %d (seq %d): a second run event: one events log holds one run", i+1, ev.Seq)
		}
		r.Info, in.haveRun = *ev.Run, true
	case event.KindPhase:
		if ev.Phase == event.PhaseDone && !in.haveDone {
			in.doneAt, in.haveDone = ev.T, true
		}
	case event.KindWindow:
		if ev.Window == nil {
			return fmt.Errorf("event %d (seq %d): window event without window", i+1, ev.Seq)
		}
		in.open = addWindow(&r.Windows, in.open, *ev.Window)
	case event.KindSamples:
		r.Samples = append(r.Samples, ev.Samples...)
	case event.KindVerdict:
		if ev.Verdict != nil && ev.Final {
			in.final = ev.Verdict
		}
	case event.KindEnd:
		r.EndMessage, r.ExitCode, in.sawEnd = ev.Message, ev.ExitCode, true
	case event.KindVerification:
		if ev.Verification != nil {
			r.Verifications = append(r.Verifications, *ev.Verification)
		}
	case event.KindLoad:
		if ev.Load != nil {
			r.Loads = addLoad(r.Loads, *ev.Load)
		}
	case event.KindMetrics:
		if m := ev.Metrics; m != nil && m.Engine != "" {
			if r.Metrics == nil {
				r.Metrics = map[string][]scrape.Point{}
			}
			r.Metrics[m.Engine] = append(r.Metrics[m.Engine], scrape.Point{T: ev.T, Reading: m.Reading})
		}
	}
	return nil
}

// withComputed is the run's final verdict as its events carry it, with
// what they do not carry taken from the verdict computed anew.
func withComputed(v, computed event.Verdict) event.Verdict {
	// event.Stats does not carry P50 and Max in JSON, so a verdict read
	// back from events has them zero: take them from the samples.
	fill := func(dst *event.Stats, src event.Stats) {
		if dst.P50 == 0 && dst.Max == 0 {
			dst.P50, dst.Max = src.P50, src.Max
		}
	}
	fill(&v.Summary.Faulted, computed.Summary.Faulted)
	fill(&v.Summary.Healthy, computed.Summary.Healthy)
	fill(&v.Summary.Recovery, computed.Summary.Recovery)
	if v.Times == nil {
		v.Times = computed.Times // a stream written before verdicts carried them
	}
	if v.Steady == nil {
		v.Steady = computed.Steady // ... or their steady-state summary
	}
	if v.Windows == nil {
		v.Windows, v.Kinds = computed.Windows, computed.Kinds // ... or their windows' verdicts
	}
	return v
}

// addWindow records a window event: End == 0 opens a window, anything else
// closes the open one on the same source and start (or records a window
// whose opening was not logged).
func addWindow(all *[]event.Window, open []int, w event.Window) []int {
	if w.End == 0 {
		*all = append(*all, w)
		return append(open, len(*all)-1)
	}
	for k, i := range open {
		if (*all)[i].Source == w.Source && (*all)[i].Start == w.Start {
			(*all)[i] = w
			return append(open[:k:k], open[k+1:]...)
		}
	}
	*all = append(*all, w)
	return open
}

// ByArm splits an event stream into one stream per arm, in the order the
// arms first appear, each in its own order. An event without an arm (a
// stream written before events carried it) belongs to the arm of the run
// event before it.
func ByArm(events []event.Event) [][]event.Event {
	var (
		order []string
		by    = map[string][]event.Event{}
		cur   string
	)
	for _, ev := range events {
		arm := ev.Arm
		if arm == "" {
			arm = cur
			if ev.Kind == event.KindRun && ev.Run != nil {
				arm = ev.Run.Arm
			}
		}
		cur = arm
		if _, ok := by[arm]; !ok {
			order = append(order, arm)
		}
		by[arm] = append(by[arm], ev)
	}
	out := make([][]event.Event, 0, len(order))
	for _, arm := range order {
		out = append(out, by[arm])
	}
	return out
}

// FromStream rebuilds every arm's run of a stream: one Run per arm, in the
// order the arms first appear.
func FromStream(events []event.Event) ([]Run, error) {
	if len(events) == 0 {
		return nil, fmt.Errorf("no run event among 0 events: not a p2pfault events log")
	}
	var runs []Run
	for _, evs := range ByArm(events) {
		r, err := FromEvents(evs)
		if err != nil {
			if arm := evs[0].Arm; arm != "" {
				err = fmt.Errorf("arm %s: %w", arm, err)
			}
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// Rebuild is RebuildAll for a stream of one arm (a row of the slice): it
// returns the first arm's run.
func Rebuild(eventsPath, outDir string) (Run, error) {
	runs, err := RebuildAll(eventsPath, outDir)
	if len(runs) == 0 {
		return Run{}, err
	}
	return runs[0], err
}

// RebuildAll reads the events file of a finished or crashed run and writes
// every report into outDir, or beside the events file when outDir is "":
// one row per arm the events carry. The runs it returns say whether the
// events were truncated; report.md says so too.
func RebuildAll(eventsPath, outDir string) ([]Run, error) {
	f, err := os.Open(eventsPath)
	if err != nil {
		return nil, fmt.Errorf("open events log: %w", err)
	}
	defer f.Close()
	events, truncated, err := ReadEvents(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", eventsPath, err)
	}
	runs, err := FromStream(events)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", eventsPath, err)
	}
	for i := range runs {
		runs[i].Truncated = runs[i].Truncated || truncated
	}
	if outDir == "" {
		outDir = filepath.Dir(eventsPath)
	}
	if err := WriteAll(outDir, runs); err != nil {
		return runs, err
	}
	return runs, nil
}
