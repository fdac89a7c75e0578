package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"path/filepath"
	"strings"
	"testing"

	"p2pfault/check"
	"p2pfault/event"
)

// wrongAfterStall is a fixed stall row whose texts were compared: every
// pull gave its source's text but three naming source-0 in the recovery
// window (cached, another text), and the pulls of the stall had no seed
// completion to compare.
func wrongAfterStall() fixture {
	f := fixedStall()
	f.content = 8
	wrong := 0
	for i := range f.samples {
		s := &f.samples[i]
		switch {
		case s.Source == 0 && s.Start >= f.window.Start && s.Start < f.window.End:
			s.SeedStatus, s.SeedErr = 0, "POST …: no answer within 1s (timeout)"
		case s.Source == 0 && s.Start >= f.window.End && s.Hit() && wrong < 3:
			s.Content, s.SourceText, s.PullText = event.ContentDiffers, " the of and to in is that for", " was on be by at this from or"
			wrong++
		default:
			s.Content = event.ContentSame
		}
	}
	return f
}

func TestAContentMismatchIsInEveryReport(t *testing.T) {
	f := wrongAfterStall()
	run := f.run(t)
	row := run.Row()
	var cm *CheckRow
	for i := range row.Checks {
		if row.Checks[i].Name == check.NameContentMatches {
			cm = &row.Checks[i]
		}
	}
	wantDetail := `3 pulls naming source-0 returned other text than the source's completion (first at 40.0s: pull " was on be by at this from or", source " the of and to in is that for")`
	if cm == nil || cm.Passed || cm.Detail != wantDetail || row.Passed {
		t.Fatalf("content_matches %+v (row passed %v), want it failed: %s", cm, row.Passed, wantDetail)
	}
	c := row.Content
	if c == nil || c.Match != "exact" || c.Tokens != 8 || c.Wrong != 3 || c.Compared+56 != c.Returned200 || len(c.Mismatches) != 3 {
		t.Fatalf("row content %+v", c)
	}
	if m := c.Mismatches[0]; m.Source != 0 || m.StartS != 40 || m.Cached != 384 || m.PullText != " was on be by at this from or" {
		t.Errorf("first mismatch %+v", m)
	}

	// report.json: rows[].content with its keys.
	var b bytes.Buffer
	if err := WriteJSON(&b, row); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	content := doc.Rows[0]["content"].(map[string]any)
	if got := strings.Join(keys(content), ","); got != "by_source,compared,match,mismatches,returned_200,tokens,wrong" {
		t.Errorf("content keys %s", got)
	}
	mm := content["mismatches"].([]any)[0].(map[string]any)
	if got := strings.Join(keys(mm), ","); got != "cached_tokens,pull_text,source,source_text,start_s,trial" {
		t.Errorf("mismatch keys %s", got)
	}

	// report.md and the terminal: the content table and the mismatches.
	b.Reset()
	if err := WriteMarkdown(&b, row); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| arm | case | content_match | compared | wrong |",
		"| + #64501 | stall | exact | 221/277 | 3 (source-0 3) |",
		`- source-0, trial `,
		`at 40.0s (cached 384): pull " was on be by at this from or", source " the of and to in is that for"`,
		"content_matches: " + wantDetail,
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if tb := Tables([]Row{row}); !strings.Contains(tb, "arm       case   content_match  compared  wrong\n+ #64501  stall  exact          221/277   3 (source-0 3)\n") {
		t.Errorf("terminal tables:\n%s", tb)
	}

	// junit.xml: a failed test case content_matches.
	b.Reset()
	if err := WriteJUnit(&b, run); err != nil {
		t.Fatal(err)
	}
	var suites ciSuites
	if err := xml.Unmarshal(b.Bytes(), &suites); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tc := range suites.Suites[0].Cases {
		if tc.Name == check.NameContentMatches {
			found = len(tc.Failures) == 1 && strings.Contains(tc.Failures[0].Message+tc.Failures[0].Text, "3 pulls naming source-0")
		}
	}
	if !found {
		t.Errorf("junit.xml has no failed content_matches:\n%s", b.String())
	}

	// report.html: the content table, the mismatches' table, the wrong
	// pulls marked with their texts for the tooltip.
	b.Reset()
	if err := WriteHTML(&b, []Run{run}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`id="table-content"`, `id="table-row-0-content"`, `pull_text`} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %s", want)
		}
	}
	if n := len(chartData("row-0", run).Pulls); n == 0 {
		t.Fatal("no pulls in the chart data")
	}
	wrongPulls := 0
	for _, p := range chartData("row-0", run).Pulls {
		if p.State == pullWrong {
			wrongPulls++
			if p.PullText == "" || p.SourceText == "" {
				t.Errorf("a wrong pull without its texts: %+v", p)
			}
		}
	}
	if wrongPulls != 3 {
		t.Errorf("%d wrong pulls in the chart data, want 3", wrongPulls)
	}
}

// TestReportRebuildsTheContentVerdict: the verdict `p2pfault report`
// computes from the samples (a run that crashed before its verdict) is the
// run's own, mismatches included; and a stream from before the check (no
// content_tokens) gets none.
func TestReportRebuildsTheContentVerdict(t *testing.T) {
	f := wrongAfterStall()
	evs := f.events()
	var final *event.Verdict
	var cut []event.Event
	for _, ev := range evs {
		if ev.Kind == event.KindVerdict {
			final = ev.Verdict
			continue
		}
		if ev.Kind != event.KindEnd {
			cut = append(cut, ev)
		}
	}
	path := writeEventsFile(t, cut, nil)
	runs, err := RebuildAll(path, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if !runs[0].Recomputed {
		t.Fatal("the verdict was not recomputed")
	}
	find := func(v event.Verdict) event.Result {
		for _, c := range v.Checks {
			if c.Name == check.NameContentMatches {
				return c
			}
		}
		return event.Result{}
	}
	if got, want := find(runs[0].Verdict), find(*final); got != want || want.Name == "" {
		t.Errorf("rebuilt %+v, the run's %+v", got, want)
	}

	old := wrongAfterStall()
	old.content = 0
	if c := find(old.run(t).Verdict); c.Name != "" {
		t.Errorf("a run without the content check got %+v", c)
	}
	if old.run(t).Row().Content != nil {
		t.Error("a run without the content check has a content row")
	}
}
