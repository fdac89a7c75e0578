package report

import (
	"bytes"
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func htmlOf(t *testing.T, runs []Run) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, runs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// pageDataOf is the JSON the page carries for its charts, parsed.
func pageDataOf(t *testing.T, page string) pageData {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="p2pfault-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no p2pfault-data script element in the page")
	}
	var d pageData
	if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
		t.Fatalf("page data is not JSON: %v\n%.500s", err, m[1])
	}
	return d
}

func TestHTMLTablesAreReportMarkdownsCells(t *testing.T) {
	runs := htmlSlice(t)
	page := htmlOf(t, runs)
	rows := Rows(runs)
	// Each table row of the page, as its cells' text.
	tableRows := func(id string) [][]string {
		m := regexp.MustCompile(`(?s)<table class="report" id="table-` + id + `">.*?<tbody>(.*?)</tbody>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no table %s in the page", id)
		}
		var out [][]string
		for _, tr := range regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`).FindAllStringSubmatch(m[1], -1) {
			var cells []string
			for _, td := range regexp.MustCompile(`(?s)<td>(.*?)</td>`).FindAllStringSubmatch(tr[1], -1) {
				cells = append(cells, html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(td[1], "")))
			}
			out = append(out, cells)
		}
		return out
	}
	seed := tableRows("seed")
	if len(seed) != len(rows) {
		t.Fatalf("seed table has %d rows, want %d", len(seed), len(rows))
	}
	for i, r := range rows {
		if got, want := strings.Join(seed[i], " | "), strings.Join(r.cells(manyModes(rows)), " | "); got != want {
			t.Errorf("seed table row %d = %q, want report.md's %q", i, got, want)
		}
	}
	times := tableRows("times")
	for i, want := range timesCells(rows, manyModes(rows)) {
		if got := strings.Join(times[i], " | "); got != strings.Join(want, " | ") {
			t.Errorf("times table row %d = %q, want %q", i, got, strings.Join(want, " | "))
		}
	}
	for i, r := range rows {
		dec := tableRows(htmlRowID(i) + "-decoder")
		for k, want := range decoderCells([]Row{r}) {
			if k >= len(dec) || strings.Join(dec[k], " | ") != strings.Join(want, " | ") {
				t.Errorf("%s/%s: decoder table %q, want report.md's line %q", r.Arm, r.Case, dec, want)
			}
		}
	}
	// Every check of every row with its message.
	for _, r := range rows {
		for _, c := range r.Checks {
			want := `<td class="name">` + html.EscapeString(c.Name) + `</td>`
			if !strings.Contains(page, want) || !strings.Contains(page, html.EscapeString(c.Detail)) {
				t.Errorf("%s/%s: check %s (%q) not in the page", r.Arm, r.Case, c.Name, c.Detail)
			}
		}
	}
}

func TestHTMLEscapesWhatComesFromEvents(t *testing.T) {
	page := htmlOf(t, htmlSlice(t))
	if strings.Contains(page, hostile) || strings.Contains(page, `<img id="pwned"`) || strings.Contains(page, "<script>window.__pwned") {
		t.Fatal("the hostile text is in the page unescaped")
	}
	// Exactly the page's own script elements: data, library, page script.
	if n := strings.Count(strings.ToLower(page), "<script"); n != 3 {
		t.Errorf("%d script elements, want 3", n)
	}
	if n := strings.Count(strings.ToLower(page), "</script"); n != 3 {
		t.Errorf("%d script end tags, want 3", n)
	}
	// As text it is there, in the event log (escaped by html/template) ...
	if !strings.Contains(page, html.EscapeString("WARNING [p2p] "+hostile)) {
		t.Error("the engine's log line is not in the event log as text")
	}
	// ... and the failed pull carries it exactly in the chart data.
	d := pageDataOf(t, page)
	found := false
	for _, p := range d.Rows[0].Pulls {
		if p.Trial == failedTrial {
			found = p.Err == hostile && p.State == pullFailed && p.Status == 500
		}
	}
	if !found {
		t.Error("the failed pull or its error is not in the chart data as it was")
	}
}

func TestHTMLNeedsNoOtherFile(t *testing.T) {
	page := htmlOf(t, htmlSlice(t))
	if !strings.Contains(page, echartsJS) {
		t.Fatal("the charting library is not inlined")
	}
	// The library's own code builds markup for its save-as-image dialog;
	// what the page itself loads is the rest.
	page = strings.Replace(page, echartsJS, "", 1)
	for _, re := range []string{`<script[^>]+src=`, `<link[^>]+href=`, `<img[^>]+src=`, `<iframe`, `@import`, `url\(\s*['"]?https?:`} {
		if m := regexp.MustCompile(`(?i)` + re).FindString(page); m != "" {
			t.Errorf("the page loads something: %q", m)
		}
	}
}

func TestVendoredEChartsIsThePinnedVersion(t *testing.T) {
	if !strings.Contains(echartsJS, `"`+EChartsVersion+`"`) {
		t.Errorf("assets/echarts/echarts.common.min.js does not carry version %q", EChartsVersion)
	}
	ver, err := os.ReadFile(filepath.Join("assets", "echarts", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ver), "echarts@"+EChartsVersion) {
		t.Errorf("assets/echarts/VERSION does not name echarts@%s:\n%s", EChartsVersion, ver)
	}
	for _, f := range []string{"LICENSE", "NOTICE", "LICENSE-d3", "LICENSE-zrender", "LICENSE-tslib"} {
		if st, err := os.Stat(filepath.Join("assets", "echarts", f)); err != nil || st.Size() == 0 {
			t.Errorf("license file %s: %v", f, err)
		}
	}
	// Inlined in a script element, the library must not end it early.
	for _, js := range []string{echartsJS, pageJS} {
		if strings.Contains(strings.ToLower(js), "</script") || strings.Contains(js, "<!--") {
			t.Error("an inlined script holds </script or <!--, which would end or hide its element")
		}
	}
}

func TestHTMLChartDataMarksPullsThatNeverEnded(t *testing.T) {
	runs := htmlSlice(t)
	d := pageDataOf(t, htmlOf(t, runs))
	if len(d.Rows) != len(runs) {
		t.Fatalf("%d chart rows, want %d", len(d.Rows), len(runs))
	}
	row := d.Rows[0]
	var pending []chartPull
	for _, p := range row.Pulls {
		if p.State == pullInFlight {
			pending = append(pending, p)
		}
	}
	if len(pending) != 1 || pending[0].Trial != pendingTrial {
		t.Fatalf("pulls in flight %+v, want only trial %d", pending, pendingTrial)
	}
	// Its age at the last event of the run (the end event, 100 ms after
	// the last batch of samples).
	last := runs[0].html.lastT
	if want := (last - pendingPullOf().Start).Seconds(); pending[0].Latency != want || want <= 0 {
		t.Errorf("pending pull's age %.3f s, want %.3f s", pending[0].Latency, want)
	}
	for _, r := range d.Rows[1:] {
		for _, p := range r.Pulls {
			if p.State == pullInFlight {
				t.Errorf("%s: pull %d in flight, but every pull of it ended", r.Title, p.Trial)
			}
		}
	}
	// Every sample is a pull of the chart, and the pending one besides.
	if got, want := len(row.Pulls), len(runs[0].Samples)+1; got != want {
		t.Errorf("%d pulls in the chart data, want %d", got, want)
	}
}

func TestHTMLHitRateFallsInTheStallWindow(t *testing.T) {
	runs := htmlSlice(t)
	rates := hitRate(runs[0]) // main/stall: source 0 misses from 10 s to 40 s
	if len(rates) != 2 {
		t.Fatalf("hit rate of %d sources, want 2", len(rates))
	}
	src0 := rates[0]
	if src0.Source != 0 || src0.Bin != 4 { // 8 trials of 0.5 s
		t.Fatalf("source 0's bins: %+v", src0)
	}
	for _, b := range src0.Points {
		pct := float64(b.Hits) / float64(b.N)
		switch {
		case b.T+src0.Bin <= 10 && pct != 1:
			t.Errorf("before the fault, bin %.0f s hit %d/%d", b.T, b.Hits, b.N)
		case b.T >= 12 && b.T+src0.Bin <= 40 && pct != 0:
			t.Errorf("in the stall, bin %.0f s hit %d/%d", b.T, b.Hits, b.N)
		}
	}
	for _, b := range rates[1].Points {
		if b.Hits != b.N {
			t.Errorf("the healthy source's bin %.0f s hit %d/%d", b.T, b.Hits, b.N)
		}
	}
}

func TestHTMLRowHasAChartPerSourceAndOneForEachFactItHas(t *testing.T) {
	runs := htmlSlice(t)
	kinds := func(r htmlRow) []string {
		var out []string
		for _, c := range r.Charts {
			out = append(out, c.Kind)
		}
		return out
	}
	streamed := htmlRowOf("row-1", runs[1], runs[1].Row())
	if got := strings.Join(kinds(streamed), ","); got != "latency,latency,hit_rate,ttft,decoder" {
		t.Errorf("fixed/stall's charts %s", got)
	}
	plain := htmlRowOf("row-2", runs[2], runs[2].Row())
	if got := strings.Join(kinds(plain), ","); got != "latency,latency,hit_rate,decoder" {
		t.Errorf("main/remove's charts %s (not streamed: no TTFT chart)", got)
	}
	// A run without scrapes, samples or pulls still gets its tables.
	empty := Run{Info: runs[2].Info, RunEnd: time.Second}
	if c := htmlRowOf("row-9", empty, empty.Row()).Charts; len(c) != 0 {
		t.Errorf("a run with nothing to chart has charts %+v", c)
	}
	if page := htmlOf(t, []Run{empty}); !strings.Contains(page, "p2pfault report: main / remove") {
		t.Error("the page of a run with no pulls has no title")
	}
}

func TestWriteAllWritesTheSamePageAsWriteHTML(t *testing.T) {
	runs := htmlSlice(t)
	dir := t.TempDir()
	if err := WriteAll(dir, runs); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, FileHTML))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != htmlOf(t, runs) {
		t.Error("report.html differs from WriteHTML's page of the same runs")
	}
}
