package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"p2pfault/check"
	"p2pfault/event"
)

func seedFixtures() []fixture { return []fixture{mainStall(), fixedStall(), mainRemove()} }

func seedRuns(t *testing.T) []Run {
	var runs []Run
	for _, f := range seedFixtures() {
		runs = append(runs, f.run(t))
	}
	return runs
}

func TestMarkdownRowMatchesTheSeed(t *testing.T) {
	cases := []struct {
		name string
		f    fixture
		want string
	}{
		{"main stall fails like the seed", mainStall(), "| main | stall | FAIL | 16.85 s / 30.04 s | 60/60, 0.07 s | 43/51 |"},
		{"fixed stall passes like the seed", fixedStall(), "| + #64501 | stall | pass | 0.01 s / 7.08 s | 60/60, 0.06 s | 41/51 |"},
		{"remove has no recovery column", mainRemove(), "| main | remove | pass | 0.01 s / 0.02 s | 120/120, 0.03 s | – |"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteMarkdown(&b, tc.f.run(t).Row()); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(b.String(), "\n")
			if lines[0] != "| arm | case | result | faulted source p50 / max | healthy source pulled, max | faulted source pulled after recovery |" {
				t.Fatalf("header = %q", lines[0])
			}
			if lines[2] != tc.want {
				t.Fatalf("row = %q\nwant  %q", lines[2], tc.want)
			}
		})
	}
}

func TestMarkdownExplainsEachFailure(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, Rows(seedRuns(t))...); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"**main / stall** failed:",
		"fault faulted: n=54 pulled=0 p50=16.85s max=30.04s",
		"faulted_max: a request naming the faulted source took 30.0s (bound 15.0s)",
		"Time scale 1 ",
		"Wall time 75.1 s.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "**+ #64501 / stall** failed") || strings.Contains(md, "healthy_keeps_hitting:") {
		t.Errorf("report.md explains a check that passed:\n%s", md)
	}
	if strings.Contains(md, "Truncated") {
		t.Errorf("report.md of whole runs says truncated:\n%s", md)
	}
	golden.RequireEqual(t, md)
}

func TestTableIsTheSeedsTableAligned(t *testing.T) {
	table := Table(Rows(seedRuns(t)))
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("table has %d lines, want header + 3:\n%s", len(lines), table)
	}
	// Every column starts at the same rune offset on every line.
	col := func(line, text string) int { return len([]rune(line[:strings.Index(line, text)])) }
	for _, c := range []struct{ header, cell string }{{"case", "stall"}, {"result", "FAIL"}, {"faulted source p50", "16.85 s"}} {
		if col(lines[0], c.header) != col(lines[1], c.cell) {
			t.Errorf("column %q at %d in the header but %q at %d:\n%s", c.header, col(lines[0], c.header), c.cell, col(lines[1], c.cell), table)
		}
	}
	golden.RequireEqual(t, table)
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestReportJSONHasExactlyTheDocumentedKeys(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, Rows(seedRuns(t))...); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("report.json does not parse: %v\n%s", err, b.String())
	}
	want := func(what string, m map[string]any, ks ...string) {
		t.Helper()
		slices.Sort(ks)
		if got := keys(m); !slices.Equal(got, ks) {
			t.Errorf("%s keys = %v, want %v", what, got, ks)
		}
	}
	want("top level", doc, "rows", "time_scale", "wall_s", "truncated", "generated")
	rows := doc["rows"].([]any)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for i, r := range rows {
		row := r.(map[string]any)
		if i == 2 {
			want("remove row", row, "arm", "mode", "case", "passed", "result", "checks", "faulted", "after_detect", "healthy", "times", "steady")
		} else {
			want("stall row", row, "arm", "mode", "case", "passed", "result", "checks", "faulted", "after_detect", "healthy", "recovery", "times", "steady")
			want("recovery", row["recovery"].(map[string]any), "n", "pulled")
		}
		want("faulted", row["faulted"].(map[string]any), "n", "pulled", "p50_s", "max_s")
		want("after_detect", row["after_detect"].(map[string]any), "n", "pulled", "p50_s", "max_s")
		want("healthy", row["healthy"].(map[string]any), "n", "pulled", "max_s")
		want("times", row["times"].(map[string]any), "detect_s", "recover_s")
		for _, c := range row["checks"].([]any) {
			want("check", c.(map[string]any), "name", "passed", "detail")
		}
		for _, s := range row["steady"].([]any) {
			want("steady", s.(map[string]any), "source", "n", "status_200", "errors", "pulled", "hit_rate", "in_flight", "p50_s", "p90_s", "p99_s", "max_s")
		}
	}
	first := rows[0].(map[string]any)
	if first["arm"] != "main" || first["mode"] != "p2p" || first["case"] != "stall" || first["passed"] != false {
		t.Errorf("first row = %v, want main/stall failed", first)
	}
	if f := first["faulted"].(map[string]any); f["n"] != 54.0 || f["pulled"] != 0.0 || f["p50_s"] != 16.85 || f["max_s"] != 30.04 {
		t.Errorf("faulted = %v, want n=54 pulled=0 p50_s=16.85 max_s=30.04", f)
	}
	if doc["time_scale"] != 1.0 || doc["truncated"] != false || doc["wall_s"] != 75.1 {
		t.Errorf("top level = scale %v truncated %v wall %v", doc["time_scale"], doc["truncated"], doc["wall_s"])
	}
	if doc["generated"] != "2025-06-01T12:01:10.1Z" {
		t.Errorf("generated = %v, want the last event's wall clock", doc["generated"])
	}
	golden.RequireEqual(t, b.String())
}

// JUnit as a CI system reads it, declared apart from the writer's types so
// the test does not just read back what the writer meant.
type ciSuites struct {
	XMLName  xml.Name  `xml:"testsuites"`
	Tests    int       `xml:"tests,attr"`
	Failures int       `xml:"failures,attr"`
	Suites   []ciSuite `xml:"testsuite"`
}

type ciSuite struct {
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Time     float64  `xml:"time,attr"`
	Cases    []ciCase `xml:"testcase"`
}

type ciCase struct {
	Name     string `xml:"name,attr"`
	Failures []struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"failure"`
}

func TestJUnitHasAFailureForEachFailedCheckOnly(t *testing.T) {
	runs := seedRuns(t)
	var b bytes.Buffer
	if err := WriteJUnit(&b, runs...); err != nil {
		t.Fatal(err)
	}
	var doc ciSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("junit.xml does not parse: %v\n%s", err, b.String())
	}
	if len(doc.Suites) != len(runs) {
		t.Fatalf("%d suites, want %d", len(doc.Suites), len(runs))
	}
	var tests, failures int
	for i, s := range doc.Suites {
		r := runs[i]
		if s.Name != r.Info.Arm+"/"+r.Info.Case {
			t.Errorf("suite %d named %q, want %q", i, s.Name, r.Info.Arm+"/"+r.Info.Case)
		}
		if len(s.Cases) != len(r.Verdict.Checks) || s.Tests != len(s.Cases) {
			t.Fatalf("suite %s: %d testcases (tests=%d), want one per check (%d)", s.Name, len(s.Cases), s.Tests, len(r.Verdict.Checks))
		}
		if s.Time < 70 || s.Time > 80 {
			t.Errorf("suite %s time %v, want the run's wall time (75.1 s)", s.Name, s.Time)
		}
		failed := 0
		for j, c := range s.Cases {
			chk := r.Verdict.Checks[j]
			if c.Name != chk.Name {
				t.Errorf("testcase %d named %q, want %q", j, c.Name, chk.Name)
			}
			switch {
			case chk.Passed && len(c.Failures) != 0:
				t.Errorf("%s/%s passed but has a failure element", s.Name, c.Name)
			case !chk.Passed && len(c.Failures) != 1:
				t.Errorf("%s/%s failed but has %d failure elements", s.Name, c.Name, len(c.Failures))
			case !chk.Passed && c.Failures[0].Message != chk.Detail:
				t.Errorf("%s/%s failure message %q, want %q", s.Name, c.Name, c.Failures[0].Message, chk.Detail)
			}
			if !chk.Passed {
				failed++
			}
		}
		if s.Failures != failed {
			t.Errorf("suite %s failures=%d, want %d", s.Name, s.Failures, failed)
		}
		tests += s.Tests
		failures += s.Failures
	}
	if doc.Tests != tests || doc.Failures != failures {
		t.Errorf("testsuites tests=%d failures=%d, want %d and %d", doc.Tests, doc.Failures, tests, failures)
	}
	if failures != 2 {
		t.Errorf("%d failed checks in all, want main/stall's faulted_max and median", failures)
	}
	if !strings.Contains(b.String(), "fault faulted: n=54 pulled=0 p50=16.85s max=30.04s") {
		t.Error("junit.xml lacks the seed line of the failed run")
	}
	golden.RequireEqual(t, b.String())
}

// svgText is every <text> of an SVG, after checking the whole document is
// well-formed XML.
func svgText(t *testing.T, svg []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var texts []string
	inText := false
	sawSVG := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			sawSVG = sawSVG || tok.Name.Local == "svg"
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(tok)))
			}
		case xml.EndElement:
			inText = false
		}
	}
	if !sawSVG {
		t.Fatal("no <svg> element")
	}
	return texts
}

func TestTimelineSVGShowsEachSeriesAndTheBound(t *testing.T) {
	cases := []struct {
		name    string
		f       fixture
		want    []string
		notWant []string
	}{
		{name: "main stall: faulted source hits and misses, healthy hits, both windows",
			f: mainStall(),
			want: []string{"main / stall", "seconds since t0", "pull latency (s)", "source 0 hit", "source 0 miss",
				"source 1 hit", "fault window", "recovery window", "faulted bound 15.0 s"},
			notWant: []string{"source 1 miss", "source 0 error", "source 1 error"}},
		{name: "remove: no recovery window",
			f:       mainRemove(),
			want:    []string{"main / remove", "source 0 miss", "source 1 hit", "fault window"},
			notWant: []string{"recovery window"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteSVG(&b, tc.f.run(t)); err != nil {
				t.Fatal(err)
			}
			texts := svgText(t, b.Bytes())
			for _, w := range tc.want {
				if !slices.Contains(texts, w) {
					t.Errorf("SVG lacks text %q; has %q", w, texts)
				}
			}
			for _, w := range tc.notWant {
				if slices.Contains(texts, w) {
					t.Errorf("SVG has text %q it should not", w)
				}
			}
			if !strings.Contains(b.String(), "stroke-dasharray") {
				t.Error("SVG has no dashed line for the bound")
			}
		})
	}
}

func TestTimelineSVGMarksFailedRequests(t *testing.T) {
	f := mainStall()
	f.samples[3].Status, f.samples[3].Err, f.samples[3].CachedTokens = 0, "timeout", 0
	var b bytes.Buffer
	if err := WriteSVG(&b, f.run(t)); err != nil {
		t.Fatal(err)
	}
	src := f.samples[3].Source
	want := []string{"source 0 error", "source 1 error"}[src]
	if texts := svgText(t, b.Bytes()); !slices.Contains(texts, want) {
		t.Fatalf("SVG lacks %q: %q", want, texts)
	}
}

func TestTimelineSVGOfARunWithoutSamples(t *testing.T) {
	r := Run{Info: event.RunInfo{Arm: "main", Case: "none", Bounds: check.DefaultBounds()}}
	var b bytes.Buffer
	if err := WriteSVG(&b, r); err != nil {
		t.Fatal(err)
	}
	if texts := svgText(t, b.Bytes()); !slices.Contains(texts, "main / none") {
		t.Fatalf("SVG lacks its title: %q", texts)
	}
}

func TestWriteAllWritesEveryReport(t *testing.T) {
	cases := []struct {
		name     string
		runs     []Run
		wantSVGs []string
	}{
		{"one run gets timeline.svg", seedRuns(t)[:1], []string{"timeline.svg"}},
		{"several runs get one timeline each, names made file-safe", seedRuns(t),
			[]string{"timeline-main-stall.svg", "timeline-___64501-stall.svg", "timeline-main-remove.svg"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out", "nested")
			if err := WriteAll(dir, tc.runs); err != nil {
				t.Fatal(err)
			}
			want := append([]string{FileJUnit, FileJSON, FileMarkdown, FileHTML, FileAnnotations}, tc.wantSVGs...)
			slices.Sort(want)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, want) {
				t.Fatalf("files = %v, want %v (no temporary files left)", got, want)
			}
		})
	}
}

func TestWriteAllRefusesNoRuns(t *testing.T) {
	if err := WriteAll(t.TempDir(), nil); err == nil {
		t.Fatal("WriteAll with no runs succeeded")
	}
}

func TestFromEvents(t *testing.T) {
	stall := mainStall()
	evs := stall.events()
	cutAt := func(T time.Duration) []event.Event {
		var out []event.Event
		for _, ev := range evs {
			if ev.T <= T {
				out = append(out, ev)
			}
		}
		return out
	}

	t.Run("a whole run takes its final verdict and is not truncated", func(t *testing.T) {
		r, err := FromEvents(evs)
		if err != nil {
			t.Fatal(err)
		}
		if r.Truncated || r.Recomputed || r.Verdict.Passed || r.ExitCode != 1 || r.EndMessage != "run complete" {
			t.Fatalf("run: truncated=%v recomputed=%v passed=%v exit=%d end=%q", r.Truncated, r.Recomputed, r.Verdict.Passed, r.ExitCode, r.EndMessage)
		}
		if r.Window != stall.window || !r.HasWindow || len(r.Windows) != 1 {
			t.Fatalf("window = %+v (windows %+v), want %+v", r.Window, r.Windows, stall.window)
		}
		if r.RunEnd != runDuration || len(r.Samples) != len(stall.samples) {
			t.Fatalf("run end %v with %d samples, want %v and %d", r.RunEnd, len(r.Samples), runDuration, len(stall.samples))
		}
		// P50 and Max do not survive JSON in event.Stats: they come back
		// from the samples.
		if got := r.Verdict.Summary.Faulted.SeedLine("faulted"); got != "fault faulted: n=54 pulled=0 p50=16.85s max=30.04s" {
			t.Fatalf("summary = %q", got)
		}
		if r.Wall() != 75100*ms {
			t.Fatalf("wall = %v, want 75.1s", r.Wall())
		}
	})

	t.Run("the final verdict is taken as logged, not recomputed", func(t *testing.T) {
		doctored := slices.Clone(evs)
		for i, ev := range doctored {
			if ev.Kind == event.KindVerdict {
				v := event.Verdict{Passed: true, Checks: []event.Result{{Name: check.NameAll200, Passed: true, Detail: "logged"}}}
				doctored[i].Verdict = &v
			}
		}
		r, err := FromEvents(doctored)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Verdict.Passed || len(r.Verdict.Checks) != 1 || r.Verdict.Checks[0].Detail != "logged" {
			t.Fatalf("verdict = %+v, want the logged one", r.Verdict)
		}
	})

	t.Run("a crash inside the fault window closes it at the last event and recomputes", func(t *testing.T) {
		r, err := FromEvents(cutAt(25 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Truncated || !r.Recomputed {
			t.Fatalf("truncated=%v recomputed=%v, want both", r.Truncated, r.Recomputed)
		}
		if r.RunEnd != 25*time.Second || r.Window.End != 25*time.Second || r.Window.Start != 10*time.Second {
			t.Fatalf("run end %v window %+v, want both ending at 25s", r.RunEnd, r.Window)
		}
		if r.Verdict.Passed {
			t.Fatal("recomputed verdict of a crashed stall passed")
		}
		rec := r.Verdict.Checks[len(r.Verdict.Checks)-1]
		if rec.Name != check.NameRecovery || !rec.Empty {
			t.Fatalf("recovery check = %+v, want an empty window: the source never came back", rec)
		}
	})

	t.Run("a crash after the window closed keeps the logged window", func(t *testing.T) {
		r, err := FromEvents(cutAt(50 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if r.Window != stall.window || r.RunEnd != 50*time.Second || !r.Recomputed {
			t.Fatalf("window %+v run end %v recomputed %v", r.Window, r.RunEnd, r.Recomputed)
		}
	})

	t.Run("a crashed run without a fault is checked for all_200 only", func(t *testing.T) {
		var noFault []event.Event
		for _, ev := range evs {
			if ev.Kind != event.KindWindow && ev.Kind != event.KindVerdict && ev.Kind != event.KindEnd {
				noFault = append(noFault, ev)
			}
		}
		r, err := FromEvents(noFault)
		if err != nil {
			t.Fatal(err)
		}
		if r.HasWindow || len(r.Windows) != 0 || r.Row().Recovery != nil {
			t.Fatalf("window %+v (has %v), recovery row %+v", r.Window, r.HasWindow, r.Row().Recovery)
		}
		if !r.Recomputed || !r.Verdict.Passed || len(r.Verdict.Checks) != 1 || r.Verdict.Checks[0].Name != check.NameAll200 {
			t.Fatalf("verdict %+v, want all_200 alone, passing", r.Verdict)
		}
	})

	// Two faults: the scripted run checks the first window, a dashboard
	// run (no timeline) the latest, as the experiment does.
	second := event.Window{Source: 1, Start: 50 * time.Second, End: 55 * time.Second, Recovers: true}
	twoFaults := slices.Clone(evs)
	for i, ev := range twoFaults {
		if ev.Kind == event.KindVerdict {
			twoFaults = slices.Delete(twoFaults, i, i+1)
			break
		}
	}
	twoFaults = slices.Insert(twoFaults, len(twoFaults)-1, event.Event{T: 55 * time.Second, Kind: event.KindWindow, Window: &second})
	for _, tc := range []struct {
		name     string
		timeline string
		want     event.Window
	}{
		{"a scripted run checks its first fault window", "10s stall source-0", stall.window},
		{"a dashboard run checks its latest fault window", "", second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(twoFaults)
			info := *in[0].Run
			info.Timeline = tc.timeline
			in[0].Run = &info
			r, err := FromEvents(in)
			if err != nil {
				t.Fatal(err)
			}
			if r.Window != tc.want || len(r.Windows) != 2 || !r.Recomputed {
				t.Fatalf("window %+v of %+v (recomputed %v), want %+v", r.Window, r.Windows, r.Recomputed, tc.want)
			}
		})
	}

	errCases := []struct {
		name string
		evs  []event.Event
		want string
	}{
		{"no run event", evs[1:], "no run event among"},
		{"two run events", append([]event.Event{evs[0]}, evs...), "a second run event"},
		{"a run event without its info", []event.Event{{Seq: 1, Kind: event.KindRun}}, "run event without run info"},
		{"a window event without its window", []event.Event{evs[0], {Seq: 2, Kind: event.KindWindow}}, "window event without window"},
	}
	for _, tc := range errCases {
		t.Run(tc.name+" is an error", func(t *testing.T) {
			if _, err := FromEvents(tc.evs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// writeEventsFile writes evs as events.jsonl into a fresh folder, then
// lets cut shorten the bytes as a crash would.
func writeEventsFile(t *testing.T, evs []event.Event, cut func([]byte) []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileEvents)
	log, err := NewEventLogWith(path, CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if err := log.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if cut != nil {
		if err := os.WriteFile(path, cut(readFile(t, path)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestRebuild(t *testing.T) {
	evs := mainStall().events()
	dropEnd := func(b []byte) []byte {
		lines := bytes.SplitAfter(b, []byte("\n"))
		return bytes.Join(lines[:len(lines)-2], nil) // last line is "" after the final newline
	}
	midLine := func(b []byte) []byte {
		b = dropEnd(b)
		return b[:len(b)-40]
	}
	cases := []struct {
		name          string
		cut           func([]byte) []byte
		wantTruncated bool
	}{
		{"a finished run is rebuilt as it was", nil, false},
		{"a run without its end event says it was truncated", dropEnd, true},
		{"a run cut mid-line says it was truncated", midLine, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeEventsFile(t, evs, tc.cut)
			dir := filepath.Dir(path)
			run, err := Rebuild(path, "")
			if err != nil {
				t.Fatal(err)
			}
			if run.Truncated != tc.wantTruncated {
				t.Fatalf("Truncated = %v, want %v", run.Truncated, tc.wantTruncated)
			}
			for _, name := range []string{FileMarkdown, FileJSON, FileJUnit, FileTimeline} {
				if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
					t.Fatalf("%s not written beside the events: %v", name, err)
				}
			}
			md := string(readFile(t, filepath.Join(dir, FileMarkdown)))
			if got := strings.Contains(md, "**Truncated:**"); got != tc.wantTruncated {
				t.Fatalf("report.md says truncated: %v, want %v\n%s", got, tc.wantTruncated, md)
			}
			var doc struct {
				Truncated bool `json:"truncated"`
				Rows      []struct {
					Passed bool `json:"passed"`
				} `json:"rows"`
			}
			if err := json.Unmarshal(readFile(t, filepath.Join(dir, FileJSON)), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Truncated != tc.wantTruncated || len(doc.Rows) != 1 || doc.Rows[0].Passed {
				t.Fatalf("report.json truncated=%v rows=%+v, want truncated=%v and main/stall failed", doc.Truncated, doc.Rows, tc.wantTruncated)
			}
			if !tc.wantTruncated {
				// Rebuilding a finished run gives the very reports the run wrote.
				var want bytes.Buffer
				if err := WriteJSON(&want, mainStall().run(t).Row()); err != nil {
					t.Fatal(err)
				}
				if got := readFile(t, filepath.Join(dir, FileJSON)); !bytes.Equal(got, want.Bytes()) {
					t.Fatalf("rebuilt report.json differs:\n%s\nwant\n%s", got, want.Bytes())
				}
			}
		})
	}
}

func TestRebuildIntoAnotherFolder(t *testing.T) {
	path := writeEventsFile(t, mainRemove().events(), nil)
	out := filepath.Join(t.TempDir(), "reports")
	run, err := Rebuild(path, out)
	if err != nil {
		t.Fatal(err)
	}
	if !run.Verdict.Passed {
		t.Fatalf("remove run failed: %+v", run.Verdict.Checks)
	}
	if _, err := os.Stat(filepath.Join(out, FileJSON)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), FileJSON)); err == nil {
		t.Fatal("report written beside the events despite an output folder")
	}
}

func TestRebuildErrorsNameTheFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope", FileEvents)
	notEvents := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(notEvents, []byte("{\"kind\":\"log\"}\n{oops\n{\"kind\":\"end\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noRun := filepath.Join(dir, "norun.jsonl")
	if err := os.WriteFile(noRun, []byte("{\"kind\":\"end\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, want string
	}{
		{"a missing file", missing, missing},
		{"a bad line in the middle", notEvents, "line 2"},
		{"a log without a run event", noRun, "no run event"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rebuild(tc.path, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, tc.path, tc.want)
			}
		})
	}
}

func BenchmarkRebuild(b *testing.B) {
	evs := mainStall().events()
	var buf bytes.Buffer
	for _, ev := range evs {
		line, err := json.Marshal(ev)
		if err != nil {
			b.Fatal(err)
		}
		buf.Write(append(line, '\n'))
	}
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		got, _, err := ReadEvents(bytes.NewReader(buf.Bytes()))
		if err != nil {
			b.Fatal(err)
		}
		r, err := FromEvents(got)
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteAll(dir, []Run{r}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf.Bytes())), "events_bytes")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/rebuild")
}
