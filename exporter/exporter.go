// Package exporter is p2pfault's own /metrics for Prometheus: a face like
// the dashboard and the headless printer, it reads a run's events only
// (package event) and turns them into Prometheus series, so a soak's pulls,
// verdicts and faults go on the same graphs as the engines' own vLLM series.
// The experiment does not know it exists: the CLI hands it a subscription to
// the run's bus, as it does the event log and the printer.
//
// Every series is labelled with the row it belongs to (arm, mode, case: a
// slice runs rows of one arm side by side) and, where it is about one, the
// source. Its memory does not grow with the run: counters and histograms
// per source, the pulls in flight (as the judge keeps them), and the
// verdicts of the last MaxWindowSeries fault windows of each row.
package exporter

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
)

const namespace = "p2pfault"

// MaxWindowSeries is how many fault windows of a row keep their check
// verdict series (p2pfault_check_passed{window="N"}): a nemesis soak opens
// a window a minute for hours, and a series per window and check would grow
// without end. Older windows' series are deleted (Prometheus keeps what it
// scraped of them); p2pfault_windows_judged_total counts them all.
const MaxWindowSeries = 8

// LatencyBuckets are the pull latency histogram's classic buckets, in
// seconds: 10 ms to 60 s on a 1-1.5-2.5-4-6 series (about ×1.6 a bucket),
// fine enough for a healthy pull of tens of milliseconds and for the
// seed's 15 s and 30 s bounds alike.
var LatencyBuckets = []float64{
	0.01, 0.015, 0.025, 0.04, 0.06,
	0.1, 0.15, 0.25, 0.4, 0.6,
	1, 1.5, 2.5, 4, 6,
	10, 15, 25, 40, 60,
}

// Pull outcomes, the outcome label: a 200 with cached tokens (every prompt
// is unique, so they came over P2P), a 200 prefilled locally, anything
// else (an error status, no answer, cut short by the run's end).
const (
	OutcomeHit   = "hit"
	OutcomeMiss  = "miss"
	OutcomeError = "error"
)

// Window results, the result label of p2pfault_windows_judged_total.
const (
	ResultPassed = "passed"
	ResultFailed = "failed"
	// ResultInterrupted: the run was cut short (a signal, an error) before
	// the window was settled, with no bound of it broken.
	ResultInterrupted = "interrupted"
)

// WindowRun is the window label of a run's own verdict (the checks its
// exit code reflects), beside each fault window's "1", "2", ...
const WindowRun = "run"

// windowChecks are the checks a fault window is judged by (the recovery
// check only for a kind that recovers): what a window's series start as,
// NaN, until its first verdict.
var windowChecks = []string{check.NameAll200, check.NameFaultedBound, check.NameFaultedMedian, check.NameHealthy}

var (
	rowLabels    = []string{"arm", "mode", "case"}
	sourceLabels = append(append([]string(nil), rowLabels...), "source")
)

// Exporter holds the series of every stream fed to it, on a registry of
// its own.
type Exporter struct {
	reg *prometheus.Registry
	now func() time.Time

	mu   sync.Mutex
	rows []*row // every arm of every stream, for the scrape-time figures

	info       *prometheus.GaugeVec
	pulls      *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	sent       *prometheus.CounterVec
	verdict    *prometheus.GaugeVec
	faultSince *prometheus.GaugeVec
	windows    *prometheus.CounterVec
	compared   *prometheus.CounterVec
	wrong      *prometheus.CounterVec
	loadSent   *prometheus.CounterVec
	loadEnded  *prometheus.CounterVec
}

// New returns an Exporter with no stream yet.
func New() *Exporter { return newAt(time.Now) }

func newAt(now func() time.Time) *Exporter {
	x := &Exporter{reg: prometheus.NewRegistry(), now: now}
	x.info = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "run_info",
		Help: "A run (one row: arm, mode, case) being or having been run; 1. engine is sim or vllm, time_scale the run's --time-scale.",
	}, append(append([]string(nil), rowLabels...), "engine", "time_scale"))
	x.pulls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "pulls_total",
		Help: "Pulls that ended, by outcome: hit (200 with cached tokens), miss (200 prefilled locally), error (any other status, no answer, cut short).",
	}, append(append([]string(nil), sourceLabels...), "outcome"))
	x.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "pull_duration_seconds",
		Help:    "Client-side latency of the pulls that ended (send until the body was read or the error), by outcome.",
		Buckets: LatencyBuckets,
		// A native histogram beside the classic buckets, for a Prometheus
		// that scrapes them (--enable-feature=native-histograms): ~10%
		// resolution at a bounded bucket count.
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}, append(append([]string(nil), sourceLabels...), "outcome"))
	x.sent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "trials_sent_total",
		Help: "Trials whose pull was sent (pull_start events); compare with p2pfault_trials_due_total.",
	}, sourceLabels)
	x.verdict = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "check_passed",
		Help: "Each check's live verdict: 1 passed, 0 failed, NaN no verdict yet (or its window still empty). window is the fault window's index (1, 2, ... in start order; the last 8 of a row) or \"run\", the run's own verdict.",
	}, append(append([]string(nil), rowLabels...), "window", "check"))
	x.faultSince = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "fault_start_timestamp_seconds",
		Help: "The fault in force on a source: present while its fault window is open, its value the window's start (Unix seconds); absent when none.",
	}, append(append([]string(nil), rowLabels...), "kind", "source"))
	x.windows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "windows_judged_total",
		Help: "Fault windows judged for good (settled, or at the run's end), by kind and result (passed, failed).",
	}, append(append([]string(nil), rowLabels...), "kind", "result"))
	x.compared = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "content_compared_total",
		Help: "Pulls whose text the content check compared with the source's own (--content-tokens > 0).",
	}, sourceLabels)
	x.wrong = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "content_wrong_total",
		Help: "Compared pulls whose text the run's content rule (--content-match) calls wrong.",
	}, sourceLabels)
	loadLabels := append(append([]string(nil), rowLabels...), "kind", "source")
	x.loadSent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "load_requests_sent_total",
		Help: "Requests a fault kind's own load (busy) sent straight to a source, apart from the probe's trials.",
	}, loadLabels)
	x.loadEnded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "load_requests_ended_total",
		Help: "Requests of a fault kind's own load that ended, by outcome: answered (200), failed, cancelled (in flight at the load's end).",
	}, append(loadLabels, "outcome"))
	x.reg.MustRegister(x.info, x.pulls, x.latency, x.sent, x.verdict, x.faultSince, x.windows, x.compared, x.wrong, x.loadSent, x.loadEnded,
		scrapeTime{x},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return x
}

// Registry is the Exporter's registry (what /metrics serves).
func (x *Exporter) Registry() *prometheus.Registry { return x.reg }

// Run feeds every event of ch to a new stream until ch closes.
func (x *Exporter) Run(ch <-chan event.Event) {
	s := x.Stream()
	for ev := range ch {
		s.Feed(ev)
	}
}

// Stream is one event stream's state: the arms it carries, each a row.
// Streams fed at once (a slice's rows) are told apart by their run events'
// arm, mode and case.
type Stream struct {
	x    *Exporter
	arms map[string]*row
}

// Stream returns a new stream feeding x.
func (x *Exporter) Stream() *Stream { return &Stream{x: x, arms: map[string]*row{}} }

// row is one arm of one stream: a run.
type row struct {
	labels []string // arm, mode, case
	info   event.RunInfo
	rule   check.ContentRule
	// t0 is the wall clock of the run's t0 (an event's Wall less its T),
	// zero until an event after t0 came; done is the probe's stop, since
	// t0 (the end of the trials due), and ended the end event.
	t0       time.Time
	done     time.Duration
	isDone   bool
	ended    bool
	inflight map[int64]event.PullStart
	// windows are the fault windows by (source, start), in the order
	// they opened: the judge's indexes.
	windows  map[winKey]*window
	nWindows int
	counted  map[int]bool // windows counted in windows_judged_total
	// undecided are the windows the final verdict left for the end event
	// to count: not settled, no bound broken, so passed (or failed on an
	// empty check) if the run ran its course, else interrupted.
	undecided []undecided
	kept      []*window       // windows whose verdict series exist, oldest first
	runSet    map[string]bool // checks the run's verdict gave a value
	sources   map[int]*sourceSeries
	loads     map[winKey]event.LoadCounts // each load's counts as last counted, by source and start
}

type undecided struct {
	index  int
	kind   string
	passed bool
}

type winKey struct {
	source int
	start  time.Duration
}

type window struct {
	index   int
	kind    string
	source  int
	open    bool
	dropped bool     // its verdict series were deleted (MaxWindowSeries)
	checks  []string // the check names its series were made with
}

func (s *Stream) row(ev event.Event) *row {
	arm := ev.Arm
	if ev.Kind == event.KindRun && ev.Run != nil && arm == "" {
		arm = ev.Run.Arm
	}
	return s.arms[arm]
}

// Feed takes one event of the stream.
func (s *Stream) Feed(ev event.Event) {
	x := s.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if ev.Kind == event.KindRun && ev.Run != nil {
		s.start(ev)
		return
	}
	r := s.row(ev)
	if r == nil {
		return // events before their arm's run event: none in a stream p2pfault writes
	}
	if r.t0.IsZero() && ev.T > 0 && !ev.Wall.IsZero() {
		r.t0 = ev.Wall.Add(-ev.T)
	}
	switch ev.Kind {
	case event.KindPhase:
		if ev.Phase == event.PhaseDone && !r.isDone {
			r.done, r.isDone = ev.T, true
		}
	case event.KindPullStart:
		for _, p := range ev.Pulls {
			r.inflight[p.Trial] = p
			x.series(r, p.Source).sent.Inc()
		}
	case event.KindSamples:
		for i := range ev.Samples {
			x.sample(r, &ev.Samples[i])
		}
	case event.KindWindow:
		if ev.Window != nil {
			x.window(r, *ev.Window)
		}
	case event.KindVerdict:
		if ev.Verdict != nil {
			x.verdictEvent(r, ev.Verdict, ev.Final)
		}
	case event.KindLoad:
		if l := ev.Load; l != nil {
			x.load(r, l)
		}
	case event.KindWindowVerdict:
		if w := ev.WindowVerdict; w != nil {
			x.setWindowChecks(r, w.Index, w.Checks, true)
			x.count(r, w.Index, w.Kind, w.Passed)
		}
	case event.KindEnd:
		x.countUndecided(r, exitcode.RunCutShort(true, ev.ExitCode, r.info.Duration == 0))
		// The run's pulls ended or were abandoned with it, and its
		// faults were lifted.
		r.ended = true
		clear(r.inflight)
		for _, w := range r.windows {
			if w.open {
				w.open = false
				x.faultSince.DeleteLabelValues(r.with(w.kind, event.SourceName(w.source))...)
			}
		}
	}
}

// load counts what a load's report adds to its last one (each report
// carries the load's counts so far).
func (x *Exporter) load(r *row, l *event.LoadInfo) {
	k := winKey{source: l.Source, start: l.Start}
	last := r.loads[k]
	r.loads[k] = l.LoadCounts
	labels := r.with(l.Kind, event.SourceName(l.Source))
	add := func(c prometheus.Counter, now, was int) {
		if now > was {
			c.Add(float64(now - was))
		}
	}
	add(x.loadSent.WithLabelValues(labels...), l.Sent, last.Sent)
	add(x.loadEnded.WithLabelValues(append(labels, "answered")...), l.Answered, last.Answered)
	add(x.loadEnded.WithLabelValues(append(labels, "failed")...), l.Failed, last.Failed)
	add(x.loadEnded.WithLabelValues(append(labels, "cancelled")...), l.Cancelled, last.Cancelled)
}

// start makes the row of a run event's arm.
func (s *Stream) start(ev event.Event) {
	x, info := s.x, *ev.Run
	arm := ev.Arm
	if arm == "" {
		arm = info.Arm
	}
	r := &row{labels: []string{arm, event.ModeOf(info.Mode), info.Case}, info: info, rule: check.ContentRuleOf(info),
		inflight: map[int64]event.PullStart{}, windows: map[winKey]*window{}, counted: map[int]bool{}, runSet: map[string]bool{},
		sources: map[int]*sourceSeries{}, loads: map[winKey]event.LoadCounts{}}
	s.arms[arm] = r
	x.rows = append(x.rows, r)
	x.info.WithLabelValues(r.with(info.Engine, strconv.FormatFloat(info.TimeScale, 'g', -1, 64))...).Set(1)
}

// with is the row's labels followed by more.
func (r *row) with(more ...string) []string {
	return append(append(make([]string, 0, len(r.labels)+len(more)), r.labels...), more...)
}

// src is the row's labels and source i's name.
func (r *row) src(i int, more ...string) []string {
	return append(r.with(event.SourceName(i)), more...)
}

// sample counts one ended trial. A trial whose pull was never sent (the
// in-flight cap, a run ended while it seeded) has no pull_start and is no
// pull: it shows only as a trial due and not sent.
func (x *Exporter) sample(r *row, s *event.Sample) {
	if _, sent := r.inflight[s.Trial]; !sent {
		return
	}
	delete(r.inflight, s.Trial)
	ss := x.series(r, s.Source)
	o := outcomeHit
	switch {
	case s.Hit():
	case s.Status == 200 && !s.Aborted:
		o = outcomeMiss
	default:
		o = outcomeError
	}
	if ss.pulls[o] == nil {
		// Made when first counted: a source that never failed has no
		// error series.
		ss.pulls[o] = x.pulls.WithLabelValues(r.src(s.Source, outcomes[o])...)
		ss.latency[o] = x.latency.WithLabelValues(r.src(s.Source, outcomes[o])...)
	}
	ss.pulls[o].Inc()
	ss.latency[o].Observe(s.Latency.Seconds())
	if r.rule.Compared(*s) {
		ss.compared.Inc()
		if r.rule.Wrong(*s) {
			ss.wrong.Inc()
		}
	}
}

// Outcomes as indexes of sourceSeries' arrays.
const (
	outcomeHit = iota
	outcomeMiss
	outcomeError
)

var outcomes = [...]string{OutcomeHit, OutcomeMiss, OutcomeError}

// sourceSeries are one source's per-pull series, looked up once: a pull
// then costs no label hashing.
type sourceSeries struct {
	pulls    [len(outcomes)]prometheus.Counter
	latency  [len(outcomes)]prometheus.Observer
	sent     prometheus.Counter
	compared prometheus.Counter // nil without the content check
	wrong    prometheus.Counter
}

// series are source i's series in row r, made on first use. With the
// content check on, its wrong count exists from then on at 0, so a rate
// over it is defined before anything went wrong.
func (x *Exporter) series(r *row, i int) *sourceSeries {
	if ss := r.sources[i]; ss != nil {
		return ss
	}
	ss := &sourceSeries{sent: x.sent.WithLabelValues(r.src(i)...)}
	if r.rule.On {
		ss.compared = x.compared.WithLabelValues(r.src(i)...)
		ss.wrong = x.wrong.WithLabelValues(r.src(i)...)
	}
	r.sources[i] = ss
	return ss
}

// window opens or closes a fault window: the fault-in-force series and,
// on opening, its checks' series at NaN (no verdict yet).
func (x *Exporter) window(r *row, w event.Window) {
	k := winKey{w.Source, w.Start}
	win := r.windows[k]
	if win == nil {
		r.nWindows++
		win = &window{index: r.nWindows, kind: w.Kind, source: w.Source}
		r.windows[k] = win
		win.checks = append([]string(nil), windowChecks...)
		if w.Recovers {
			win.checks = append(win.checks, check.NameRecovery)
		}
		x.keep(r, win)
		// Both results' series exist from the window's opening on, at 0,
		// so a graph of them has data before the first window is judged.
		for _, res := range []string{ResultPassed, ResultFailed} {
			x.windows.WithLabelValues(r.with(win.kind, res)...).Add(0)
		}
	}
	labels := r.with(win.kind, event.SourceName(w.Source))
	if w.End == 0 && !r.ended {
		win.open = true
		at := r.t0.Add(w.Start)
		x.faultSince.WithLabelValues(labels...).Set(float64(at.UnixNano()) / 1e9)
		return
	}
	win.open = false
	x.faultSince.DeleteLabelValues(labels...)
}

// keep makes a new window's verdict series (NaN) and the run's for the
// same checks when no verdict set them yet, and drops the series of the
// window MaxWindowSeries before it.
func (x *Exporter) keep(r *row, win *window) {
	idx := strconv.Itoa(win.index)
	for _, c := range win.checks {
		x.verdict.WithLabelValues(r.with(idx, c)...).Set(math.NaN())
		if !r.runSet[c] {
			x.verdict.WithLabelValues(r.with(WindowRun, c)...).Set(math.NaN())
		}
	}
	r.kept = append(r.kept, win)
	if len(r.kept) <= MaxWindowSeries {
		return
	}
	old := r.kept[0]
	r.kept = r.kept[1:]
	old.dropped = true
	for _, c := range old.checks {
		x.verdict.DeleteLabelValues(r.with(strconv.Itoa(old.index), c)...)
	}
	// A closed window gets no more window events: forget it. One still
	// open (a remove lasts to the run's end) stays until it closes.
	for k, w := range r.windows {
		if w == old && !w.open {
			delete(r.windows, k)
		}
	}
}

// verdictEvent sets the run's checks (window "run") and each window the
// verdict carries; the final one counts the windows no window_verdict
// counted. A run of one window gets no window_verdict and no windows in
// its verdicts: the run's verdict is its window's.
func (x *Exporter) verdictEvent(r *row, v *event.Verdict, final bool) {
	for _, c := range v.Checks {
		x.verdict.WithLabelValues(r.with(WindowRun, c.Name)...).Set(verdictValue(c, final))
		r.runSet[c.Name] = true
	}
	for _, w := range v.Windows {
		x.setWindowChecks(r, w.Index, w.Checks, final || w.Settled)
	}
	if len(v.Windows) == 0 && r.nWindows == 1 {
		x.setWindowChecks(r, 1, v.Checks, final)
	}
	if !final {
		return
	}
	// A window settled, or with a bound broken, has its result whatever
	// the end; the others wait for it (countUndecided).
	for _, w := range v.Windows {
		x.countFinal(r, undecided{w.Index, w.Kind, w.Passed}, w.Settled || check.WindowBroken(w))
	}
	if len(v.Windows) == 0 && r.nWindows == 1 {
		for _, w := range r.windows {
			x.countFinal(r, undecided{w.index, w.kind, v.Passed}, check.Broken(*v))
		}
	}
}

// countFinal counts w now when decided, else at the end event.
func (x *Exporter) countFinal(r *row, w undecided, decided bool) {
	if decided {
		x.count(r, w.index, w.kind, w.passed)
		return
	}
	r.undecided = append(r.undecided, w)
}

// countUndecided counts the windows the final verdict left undecided:
// interrupted when the run was cut short, else as the verdict judged them.
func (x *Exporter) countUndecided(r *row, cut bool) {
	for _, w := range r.undecided {
		if cut {
			x.countAs(r, w.index, w.kind, ResultInterrupted)
		} else {
			x.count(r, w.index, w.kind, w.passed)
		}
	}
	r.undecided = nil
}

// setWindowChecks sets window index's series for the checks it was made
// with (a run's verdict also carries content_matches and
// fault_took_effect, which are not a window's); settled says nothing to
// come can change them.
func (x *Exporter) setWindowChecks(r *row, index int, checks []event.Result, settled bool) {
	var win *window
	for _, w := range r.windows {
		if w.index == index {
			win = w
		}
	}
	if win == nil || win.dropped {
		return // one of the windows whose series were dropped
	}
	idx := strconv.Itoa(index)
	for _, c := range checks {
		for _, name := range win.checks {
			if name == c.Name {
				x.verdict.WithLabelValues(r.with(idx, c.Name)...).Set(verdictValue(c, settled))
			}
		}
	}
}

// count counts window index once, under its kind and result.
func (x *Exporter) count(r *row, index int, kind string, ok bool) {
	res := ResultFailed
	if ok {
		res = ResultPassed
	}
	x.countAs(r, index, kind, res)
}

func (x *Exporter) countAs(r *row, index int, kind, res string) {
	if r.counted[index] {
		return
	}
	r.counted[index] = true
	x.windows.WithLabelValues(r.with(kind, res)...).Inc()
}

// verdictValue is a check's series value: 1 passed, 0 failed, and NaN
// while a live verdict finds its window empty (no pull of it ended yet:
// the faces show no failure then either), which a settled or final
// verdict is not: an empty window that fails then has failed.
func verdictValue(c event.Result, settled bool) float64 {
	if c.Empty && !c.Passed && !settled {
		return math.NaN()
	}
	return passed(c.Passed)
}

func passed(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}
