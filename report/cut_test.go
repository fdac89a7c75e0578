package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
)

// hungStall is a stall whose faulted pulls all hang for 30 s (vLLM
// main waiting on a stalled peer): cut early, no bound has broken yet; cut
// later, the pulls in flight are past faulted_max.
func hungStall() fixture {
	return seedRun("main", "stall", stallWindow(), 60, func(int) time.Duration { return 30 * time.Second }, 70*ms, 51, 43)
}

// cutEvents are the events of a run of info with fault windows ws and
// pulls samples as the experiment writes them when it is cut at T: the
// pulls that ended by T, those in flight then cut short at their age
// (Aborted), every window closed at T at the latest (a stall is resumed
// on the way out), the final verdict judged at T, and end, the end event
// (nil: none, the run crashed).
func cutEvents(info event.RunInfo, ws []event.Window, samples []event.Sample, T time.Duration, end *event.Event) []event.Event {
	evs := []event.Event{
		{T: -5 * time.Second, Kind: event.KindRun, Run: &info},
		{T: 0, Kind: event.KindPhase, Phase: event.PhaseBaseline},
	}
	var closed []event.Window
	for _, w := range ws {
		if w.Start >= T {
			continue
		}
		open := w
		open.End = 0
		if w.End == 0 || w.End > T {
			w.End = T
		}
		closed = append(closed, w)
		evs = append(evs, event.Event{T: w.Start, Kind: event.KindWindow, Window: &open},
			event.Event{T: w.End, Kind: event.KindWindow, Window: &w})
	}
	var seen []event.Sample
	for _, s := range samples {
		if s.Start >= T {
			continue
		}
		if s.End() > T {
			s = event.Sample{Source: s.Source, Trial: s.Trial, Start: s.Start, Latency: T - s.Start, Aborted: true, Err: "cut short by the run's end"}
		}
		seen = append(seen, s)
		evs = append(evs, event.Event{T: s.End(), Kind: event.KindSamples, Samples: []event.Sample{s}})
	}
	v, _ := check.JudgeRun(check.RunFacts{
		Setup:   check.Setup{Bounds: info.Bounds, Sources: info.Sources, Scripted: info.Timeline != ""},
		Windows: closed, Samples: seen, Now: T, RunEnd: T,
	})
	evs = append(evs, event.Event{T: T, Kind: event.KindPhase, Phase: event.PhaseDone},
		event.Event{T: T, Kind: event.KindVerdict, Verdict: &v, Final: true})
	if end != nil {
		end.T, end.Kind = T, event.KindEnd
		evs = append(evs, *end)
	}
	slices.SortStableFunc(evs, func(a, b event.Event) int { return cmp.Compare(a.T, b.T) })
	for i := range evs {
		evs[i].Seq = int64(i + 1)
		evs[i].Wall = wall0().Add(evs[i].T)
	}
	return evs
}

// cut is f's run cut at T, ended by end (nil: it crashed).
func (f fixture) cut(t *testing.T, T time.Duration, end *event.Event) Run {
	t.Helper()
	r, err := FromEvents(cutEvents(f.info(), []event.Window{f.window}, f.samples, T, end))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func interruptedEnd() *event.Event {
	return &event.Event{ExitCode: exitcode.Interrupted, Message: "interrupted"}
}

// cutSuites is junit.xml as a CI system reads its failures and errors.
type cutSuites struct {
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Suites   []struct {
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Cases    []struct {
			Name    string     `xml:"name,attr"`
			Failure *ciMessage `xml:"failure"`
			Error   *ciMessage `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

type ciMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
}

// junitOf is r's junit.xml as a CI system reads it.
func junitOf(t *testing.T, r Run) cutSuites {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJUnit(&b, r); err != nil {
		t.Fatal(err)
	}
	var doc cutSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("junit.xml does not parse: %v\n%s", err, b.String())
	}
	return doc
}

// jsonRow is r's row as report.json has it.
func jsonRow(t *testing.T, r Run) map[string]any {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJSON(&b, r.Row()); err != nil {
		t.Fatal(err)
	}
	var doc struct{ Rows []map[string]any }
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Rows[0]
}

func markdownOf(t *testing.T, r Run) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r.Row()); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestARunCutShortWithNoBoundBrokenReadsInterruptedEverywhere(t *testing.T) {
	cases := []struct {
		name    string
		run     func(t *testing.T) Run
		wantWhy string
	}{
		{"interrupted 1.5 s into a stall whose pulls hang", func(t *testing.T) Run {
			return hungStall().cut(t, 11500*ms, interruptedEnd())
		}, "interrupted"},
		{"interrupted halfway through a stall that goes well", func(t *testing.T) Run {
			return fixedStall().cut(t, 20*time.Second, interruptedEnd())
		}, "interrupted"},
		{"ended by a log that could not be written (exit 2)", func(t *testing.T) Run {
			return fixedStall().cut(t, 20*time.Second, &event.Event{ExitCode: exitcode.Usage, Message: "write events.jsonl: no space left on device"})
		}, "write events.jsonl: no space left on device"},
		{"ended by a signal with a code of its own (SIGHUP, 129)", func(t *testing.T) Run {
			return fixedStall().cut(t, 20*time.Second, &event.Event{ExitCode: 129, Message: "hangup"})
		}, "hangup"},
		{"crashed: no end event", func(t *testing.T) Run {
			return hungStall().cut(t, 11500*ms, nil)
		}, truncatedReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.run(t)
			if r.Verdict.Passed {
				t.Fatalf("the verdict of a run cut short passed: %+v (the test needs a window left open)", r.Verdict)
			}
			if got := r.CutShortBy(); got != tc.wantWhy {
				t.Fatalf("CutShortBy = %q, want %q", got, tc.wantWhy)
			}
			row := r.Row()
			if row.Result != ResultInterrupted || row.Passed || row.CutShort != tc.wantWhy {
				t.Fatalf("row result %q passed %v cut_short %q, want interrupted, false, %q", row.Result, row.Passed, row.CutShort, tc.wantWhy)
			}
			if tab := Table([]Row{row}); !strings.Contains(tab, " INTERRUPTED ") || strings.Contains(tab, "FAIL") {
				t.Fatalf("table:\n%s\nwant INTERRUPTED and no FAIL", tab)
			}
			md := markdownOf(t, r)
			if !strings.Contains(md, "| INTERRUPTED |") || !strings.Contains(md, "was cut short ("+tc.wantWhy+") with no bound broken") || strings.Contains(md, "failed:") {
				t.Fatalf("report.md does not say the run was interrupted, or says it failed:\n%s", md)
			}
			if j := jsonRow(t, r); j["result"] != ResultInterrupted || j["passed"] != false || j["cut_short"] != tc.wantWhy {
				t.Fatalf("report.json row result %v passed %v cut_short %v", j["result"], j["passed"], j["cut_short"])
			}
			doc := junitOf(t, r)
			s := doc.Suites[0]
			if doc.Failures != 0 || s.Failures != 0 || s.Errors == 0 || doc.Errors != s.Errors {
				t.Fatalf("junit failures %d (suite %d), errors %d (suite %d): want no failure, errors", doc.Failures, s.Failures, doc.Errors, s.Errors)
			}
			last := s.Cases[len(s.Cases)-1]
			if last.Name != junitCompleted || last.Error == nil || last.Error.Message != tc.wantWhy || last.Error.Type != "interrupted" {
				t.Fatalf("last test case = %+v, want %s with an error %q", last, junitCompleted, tc.wantWhy)
			}
			for _, c := range s.Cases {
				if c.Failure != nil {
					t.Fatalf("test case %s has a failure: %+v", c.Name, c.Failure)
				}
			}
			if a := Annotations([]Run{r}); len(a) != 1 || !slices.Contains(a[0].Tags, ResultInterrupted) {
				t.Fatalf("annotations %+v, want the window tagged interrupted", a)
			}
		})
	}
}

func TestARunCutShortWithABoundBrokenStaysFail(t *testing.T) {
	// Cut 16 s into the stall: the pulls sent at its start are in flight
	// past faulted_max (15 s), whatever they would have done next.
	r := hungStall().cut(t, 26*time.Second, interruptedEnd())
	if !check.Broken(r.Verdict) {
		t.Fatalf("no bound broken at the cut: %+v", r.Verdict.Checks)
	}
	row := r.Row()
	if row.Result != ResultFail || row.Passed || row.CutShort != "interrupted" {
		t.Fatalf("row result %q passed %v cut_short %q, want fail, false, interrupted", row.Result, row.Passed, row.CutShort)
	}
	if tab := Table([]Row{row}); !strings.Contains(tab, " FAIL ") || strings.Contains(tab, "INTERRUPTED") {
		t.Fatalf("table:\n%s\nwant FAIL", tab)
	}
	md := markdownOf(t, r)
	if !strings.Contains(md, "| FAIL |") || !strings.Contains(md, "a bound had already broken, so it reads FAIL") || !strings.Contains(md, "in flight past 15.0s") {
		t.Fatalf("report.md:\n%s", md)
	}
	if j := jsonRow(t, r); j["result"] != ResultFail || j["cut_short"] != "interrupted" {
		t.Fatalf("report.json row result %v cut_short %v", j["result"], j["cut_short"])
	}
	s := junitOf(t, r).Suites[0]
	var failed []string
	for _, c := range s.Cases {
		if c.Failure != nil {
			failed = append(failed, c.Name)
		}
	}
	if !slices.Contains(failed, check.NameFaultedBound) {
		t.Fatalf("junit failures %v, want %s among them", failed, check.NameFaultedBound)
	}
	if last := s.Cases[len(s.Cases)-1]; last.Name != junitCompleted || last.Error == nil {
		t.Fatalf("last test case = %+v, want %s with an error", last, junitCompleted)
	}
}

func TestARunThatRanItsCourseIsNotCutShort(t *testing.T) {
	for _, f := range []fixture{mainStall(), fixedStall(), mainRemove()} {
		r := f.run(t)
		row := r.Row()
		want := ResultFail
		if row.Passed {
			want = ResultPass
		}
		if r.CutShortBy() != "" || row.CutShort != "" || row.Result != want {
			t.Fatalf("%s: cut short %q, result %q, want not cut short and %q", r.Name(), row.CutShort, row.Result, want)
		}
		var b bytes.Buffer
		if err := WriteJUnit(&b, r); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), "<error") || strings.Contains(b.String(), junitCompleted) {
			t.Fatalf("%s: junit.xml of a run that ran its course has an error:\n%s", r.Name(), b.String())
		}
	}
	// A run with no planned end (the dashboard's, until q) ends when it is
	// interrupted.
	f := fixedStall()
	info := f.info()
	info.Duration, info.Timeline = 0, ""
	r, err := FromEvents(cutEvents(info, []event.Window{f.window}, f.samples, 50*time.Second, interruptedEnd()))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.CutShortBy(); got != "" {
		t.Fatalf("a run until quit, quit: cut short %q", got)
	}
}

func TestAWindowSettledBeforeTheCutKeepsItsVerdict(t *testing.T) {
	// Two stalls; the run is cut inside the second: the first window (and
	// its recovery up to the second) was settled and passed, the second is
	// interrupted, and so is the row.
	var samples []event.Sample
	for at := time.Duration(0); at < 60*time.Second; at += 500 * ms {
		samples = append(samples, hit(0, at, 10*ms), hit(1, at, 10*ms))
	}
	for i := range samples {
		samples[i].Trial = int64(i)
	}
	ws := []event.Window{
		{Source: 0, Start: 10 * time.Second, End: 15 * time.Second, Recovers: true, Kind: "stall"},
		{Source: 0, Start: 40 * time.Second, End: 45 * time.Second, Recovers: true, Kind: "stall"},
	}
	info := fixedStall().info()
	info.Nemesis = "random"
	r, err := FromEvents(cutEvents(info, ws, samples, 42*time.Second, interruptedEnd()))
	if err != nil {
		t.Fatal(err)
	}
	row := r.Row()
	if row.Result != ResultInterrupted || len(row.Windows) != 2 {
		t.Fatalf("row result %q with %d windows, want interrupted and 2", row.Result, len(row.Windows))
	}
	if w := row.Windows[0]; w.Result != ResultPass || !w.Passed {
		t.Fatalf("window 1 = %+v, want its own pass", w)
	}
	if w := row.Windows[1]; w.Result != ResultInterrupted || w.Passed {
		t.Fatalf("window 2 = %+v, want interrupted", w)
	}
	if tab := WindowsTable([]Row{row}); !strings.Contains(tab, "INTERRUPTED") || strings.Contains(tab, "FAIL ") {
		t.Fatalf("per-window table:\n%s", tab)
	}
	if fails := row.WindowFailures(); len(fails) != 0 {
		t.Fatalf("window failures of an interrupted window: %v", fails)
	}
}

func TestReportOfACrashedRunsEventsSaysItDidNotEnd(t *testing.T) {
	evs := cutEvents(hungStall().info(), []event.Window{stallWindow()}, hungStall().samples, 11500*ms, nil)
	path := writeEventsFile(t, evs, func(b []byte) []byte { return b[:len(b)-25] }) // a last line cut mid-way
	runs, err := RebuildAll(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if !runs[0].Truncated || runs[0].CutShortBy() != truncatedReason {
		t.Fatalf("truncated %v, cut short %q", runs[0].Truncated, runs[0].CutShortBy())
	}
	dir := filepath.Dir(path)
	var doc struct {
		Rows []struct {
			Result   string `json:"result"`
			CutShort string `json:"cut_short"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, FileJSON)), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Rows[0].Result != ResultInterrupted || doc.Rows[0].CutShort != truncatedReason {
		t.Fatalf("report.json row = %+v", doc.Rows[0])
	}
	md := string(readFile(t, filepath.Join(dir, FileMarkdown)))
	if !strings.Contains(md, "| INTERRUPTED |") || !strings.Contains(md, "the run did not end: cut short") {
		t.Fatalf("report.md:\n%s", md)
	}
	html := string(readFile(t, filepath.Join(dir, FileHTML)))
	if !strings.Contains(html, `<span class="badge">INTERRUPTED</span>`) || !strings.Contains(html, `class="row interrupted"`) {
		t.Fatal("report.html shows no INTERRUPTED badge")
	}
}

// A crash's events with no final verdict: the pulls told by pull_start
// and never ended count at their age at the last event, so a crash 29 s
// into a stall whose pulls hang has broken faulted_max (FAIL), one 1 s
// into it has broken nothing yet (INTERRUPTED).
func TestACrashedRunIsInterruptedUnlessItsPendingPullsBrokeABound(t *testing.T) {
	for _, tc := range []struct {
		end  time.Duration
		want string
	}{{11 * time.Second, ResultInterrupted}, {39 * time.Second, ResultFail}} {
		r, err := FromEvents(hangingStall(tc.end))
		if err != nil {
			t.Fatal(err)
		}
		if row := r.Row(); row.Result != tc.want || row.CutShort != truncatedReason {
			t.Errorf("crashed at %v: result %q cut short %q, want %q and %q", tc.end, row.Result, row.CutShort, tc.want, truncatedReason)
		}
	}
}

// The seed's table beside an interrupted row sets no verdict of the run
// beside the seed's: its result cell says INTERRUPTED, and differs.
func TestCompareSeedShowsAnInterruptedRow(t *testing.T) {
	row := hungStall().cut(t, 11500*ms, interruptedEnd()).Row()
	for _, c := range CompareSeed([]Row{row}, SeedScale{TimeScale: 1}) {
		if c.Cell == "result" {
			if c.Sim != "INTERRUPTED" || c.Seed != "FAIL" || !c.Outside {
				t.Fatalf("result cell = %+v, want INTERRUPTED beside the seed's FAIL", c)
			}
			return
		}
	}
	t.Fatal("no result cell for main/stall")
}
