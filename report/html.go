package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"p2pfault/event"
)

// FileHTML is report.html: the tables, the checks and interactive charts of
// every row in one self-contained page.
const FileHTML = "report.html"

// The page's parts, inlined so report.html opens with no network and no
// other file: Apache ECharts (vendored, see assets/echarts/VERSION), the
// script that turns the page's data into chart options, and the styles.
var (
	//go:embed assets/echarts/echarts.common.min.js
	echartsJS string
	//go:embed assets/page.js
	pageJS string
	//go:embed assets/page.css
	pageCSS string
	//go:embed assets/page.html
	pageHTML string
)

// EChartsVersion is the version of the vendored charting library.
const EChartsVersion = "6.1.0"

var pageTemplate = template.Must(template.New(FileHTML).Funcs(template.FuncMap{
	"seconds": func(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) },
}).Parse(pageHTML))

// htmlPage is what the template renders. Every string in it is text,
// escaped by html/template wherever it lands: engine log lines and error
// strings cannot break the page. The charts' data goes in as JSON
// (Data), which html/template escapes for its script element.
type htmlPage struct {
	Title   string
	Summary []string
	Tables  []htmlTable
	Notes   []string
	Rows    []htmlRow
	// Sweeps are the charts against a swept setting (sweep.go); page.js
	// draws each from Data.Sweeps by its ID.
	Sweeps []chartSweep
	Data   pageData

	CSS            template.CSS
	Library        template.JS
	Script         template.JS
	LibraryVersion string
}

// htmlTable is a table as report.md has it: a header and text cells, from
// the same functions that write report.md.
type htmlTable struct {
	ID      string
	Title   string
	Caption string
	Head    []string
	Rows    []htmlTableRow
}

type htmlTableRow struct {
	Cells  []string
	Failed bool
	Href   string // the row's section, linked from its first cell
}

// htmlRow is one arm × case: its checks, its charts, its own tables and
// its event log.
type htmlRow struct {
	ID     string
	Title  string
	Passed bool
	// Class and Badge are its result as the page styles and shows it:
	// pass, fail or interrupted (a run cut short with no bound broken);
	// pass, FAIL, not judged or INTERRUPTED.
	Class, Badge string
	SeedLine     string
	Notes        []string
	Checks       []CheckRow
	Tables       []htmlTable
	Charts       []htmlChart
	// Ladders are the slowest pulls' sequence diagrams (ladder_svg.go).
	Ladders    []htmlLadder
	Log        []logEntry
	LogDropped int
	// JSON is the row as report.json has it, indented: every field a row
	// gets shows here without the page knowing of it.
	JSON string
}

// htmlChart is a chart's place in the page; page.js draws it from the
// row's data by its Kind.
type htmlChart struct {
	ID     string
	Kind   string // latency, hit_rate, ttft, decoder
	Title  string
	Source int // latency: the source whose pulls it plots
}

// WriteHTML writes report.html for runs: the seed's table and the times
// table (the cells report.md prints), then per row its checks, its charts
// and its tables (the decoder's /metrics, TTFT, faults verified).
func WriteHTML(w io.Writer, runs []Run) error {
	p := buildPage(runs)
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		return fmt.Errorf("write %s: %w", FileHTML, err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write %s: %w", FileHTML, err)
	}
	return nil
}

func buildPage(runs []Run) htmlPage {
	rows := Rows(runs)
	p := htmlPage{
		CSS:            template.CSS(pageCSS),
		Library:        template.JS(echartsJS),
		Script:         template.JS(pageJS),
		LibraryVersion: EChartsVersion,
	}
	p.Title = "p2pfault report"
	if len(rows) == 1 {
		p.Title += ": " + rows[0].title()
	}
	p.Summary = summary(rows)

	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = htmlRowID(i)
	}
	withMode := manyModes(rows)
	seed := htmlTable{ID: "seed", Title: "The seed's table", Head: header(withMode)}
	for i, r := range rows {
		seed.Rows = append(seed.Rows, htmlTableRow{Cells: r.cells(withMode), Failed: failedRow(r), Href: "#" + ids[i]})
	}
	times := htmlTable{ID: "times", Title: "Detect and recover times", Head: timesHeader(withMode)}
	for i, c := range timesCells(rows, withMode) {
		times.Rows = append(times.Rows, htmlTableRow{Cells: c, Failed: failedRow(rows[i]), Href: "#" + ids[i]})
	}
	p.Tables = []htmlTable{seed, times}
	if cells := contentCells(rows, withMode); cells != nil {
		content := htmlTable{ID: "content", Title: "Content: pulls' texts against the source's", Head: contentHeader(withMode),
			Caption: "compared: pulls that returned 200 with a source completion to compare, of those that returned 200"}
		for i, c := range cells {
			content.Rows = append(content.Rows, htmlTableRow{Cells: c, Failed: rows[i].Content != nil && rows[i].Content.Wrong > 0, Href: "#" + ids[i]})
		}
		p.Tables = append(p.Tables, content)
	}
	if cells := steadyCells(rows); len(cells) > 0 {
		steady := htmlTable{ID: "steady", Title: "Steady state per source", Caption: steadyCaption(rows) + ".", Head: steadyHeader(rows)}
		p.Tables = append(p.Tables, linkRows(steady, cells, rows, ids, func(r Row) int { return len(r.Steady) }))
	}
	if cells := rankCells(rows); len(cells) > 0 {
		rt := rankTable(rows)
		title := "Per data-parallel rank"
		if byDecoder(rows) {
			title = "Per decoder↔source pair"
			dt := decoderTable(rows)
			p.Tables = append(p.Tables, linkRows(htmlTable{ID: "decoders", Title: "Per decoder", Caption: dt.caption, Head: dt.head},
				dt.cells, rows, ids, func(r Row) int { return len(decodersOf(r)) }))
		}
		ranks := htmlTable{ID: "ranks", Title: title, Caption: rt.caption, Head: rt.head}
		p.Tables = append(p.Tables, linkRows(ranks, cells, rows, ids, func(r Row) int { return len(r.Ranks) }))
	}

	for _, r := range rows {
		if r.Truncated {
			p.Notes = append(p.Notes, fmt.Sprintf("The events of %s end without an end event or with a partial line: the run crashed or was still running.", r.title()))
		}
	}

	for i, run := range runs {
		p.Rows = append(p.Rows, htmlRowOf(ids[i], run, rows[i]))
		p.Data.Rows = append(p.Data.Rows, chartData(ids[i], run))
	}
	p.Sweeps = sweepCharts(runs, rows)
	p.Data.Sweeps = p.Sweeps
	return p
}

// failedRow reports whether the page marks r failed: it did not pass and
// was not merely cut short.
func failedRow(r Row) bool { return !r.Passed && r.Result != ResultInterrupted }

func summary(rows []Row) []string {
	passed, cut := 0, 0
	for _, r := range rows {
		switch {
		case r.Passed:
			passed++
		case r.Result == ResultInterrupted:
			cut++
		}
	}
	first, last := span(rows)
	scale := 0.0
	if len(rows) > 0 {
		scale = rows[0].TimeScale
	}
	out := []string{
		fmt.Sprintf("%d row(s): %d passed, %d failed", len(rows), passed, len(rows)-passed-cut) + interruptedCount(cut),
		fmt.Sprintf("time scale %g (durations and bounds were multiplied by it; times are real seconds)", scale),
		fmt.Sprintf("wall time %.1f s", last.Sub(first).Seconds()),
	}
	if !last.IsZero() {
		out = append(out, "last event "+last.UTC().Format(time.RFC3339))
	}
	return out
}

func interruptedCount(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d interrupted", n)
}

// linkRows fills t with cells, each line linked to its row's section:
// lines(r) of the cells, in order, are row r's.
func linkRows(t htmlTable, cells [][]string, rows []Row, ids []string, lines func(Row) int) htmlTable {
	k := 0
	for i, r := range rows {
		for range lines(r) {
			t.Rows = append(t.Rows, htmlTableRow{Cells: cells[k], Href: "#" + ids[i]})
			k++
		}
	}
	return t
}

func plainHTMLTable(id, title, caption string, head []string, cells [][]string) htmlTable {
	t := htmlTable{ID: id, Title: title, Caption: caption, Head: head}
	for _, c := range cells {
		t.Rows = append(t.Rows, htmlTableRow{Cells: c})
	}
	return t
}

func htmlRowOf(id string, run Run, row Row) htmlRow {
	h := htmlRow{
		ID:         id,
		Title:      row.title(),
		Passed:     row.Passed,
		Class:      htmlClass(row.Result),
		Badge:      row.resultText(),
		Checks:     row.Checks,
		Log:        run.html.log,
		LogDropped: run.html.logDropped,
		Notes:      htmlNotes(run, row),
		Tables:     htmlTables(id, row),
		Charts:     htmlCharts(id, run, row),
		Ladders:    htmlLaddersOf(id, run),
	}
	if !row.Passed && row.Result != ResultInterrupted {
		h.SeedLine = row.SeedLine()
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // html/template escapes it where it lands
	if err := enc.Encode(row); err == nil {
		h.JSON = b.String()
	}
	return h
}

// htmlClass is the page's style of a row of result: pass, fail or
// interrupted (not judged is styled as a fail, as before it had a word).
func htmlClass(result string) string {
	switch result {
	case ResultPass, ResultInterrupted:
		return result
	}
	return "fail"
}

// htmlNotes say what the row's figures lack: a run cut short, pulls
// that never ended.
func htmlNotes(run Run, row Row) []string {
	var notes []string
	if row.CutShort != "" {
		var b strings.Builder
		writeCutShort(&b, row)
		first, _, _ := strings.Cut(strings.TrimSpace(b.String()), "\n")
		notes = append(notes, strings.ReplaceAll(first, "**", ""))
	}
	if row.Truncated {
		n := "The events end without an end event or with a partial line: the run crashed or was still running."
		if row.Recomputed {
			n += " Its checks were evaluated from the samples logged before that."
		}
		notes = append(notes, n)
	}
	if p := run.pending(); len(p) > 0 {
		notes = append(notes, fmt.Sprintf("%d pull(s) started and never ended in the events (in flight when they stop); the charts mark them at their age then.", len(p)))
	}
	return notes
}

// htmlTables are the row's tables, those report.md has and those only
// the page shows, each where the row has something to put in it.
func htmlTables(id string, row Row) []htmlTable {
	var ts []htmlTable
	if len(row.Windows) > 0 {
		// Fault by fault, then per kind: the tables report.md has.
		wt := plainHTMLTable(id+"-windows", "Fault by fault", windowsCaption+".", windowsHeader(false), windowsCells([]Row{row}))
		for i, w := range row.Windows {
			wt.Rows[i].Failed = !w.Passed && w.Result != ResultInterrupted
		}
		ts = append(ts, wt,
			plainHTMLTable(id+"-kinds", "Per kind", "", kindsHeader(false), kindsCells([]Row{row})))
	}
	if cells := decoderCells([]Row{row}); len(cells) > 0 {
		ts = append(ts, plainHTMLTable(id+"-decoder", "The decoder's /metrics", decoderCaption+".", decoderHeader(keyCols{}), cells))
	}
	if len(row.TTFT) > 0 {
		ts = append(ts, plainHTMLTable(id+"-ttft", "Time to first token (streamed pulls)", "", ttftHeader(), ttftCells(row)))
	}
	if c := row.Content; c != nil && len(c.Mismatches) > 0 {
		var cells [][]string
		for _, m := range c.Mismatches {
			cells = append(cells, []string{event.SourceName(m.Source), fmt.Sprint(m.Trial), fmt.Sprintf("%.1f s", m.StartS),
				fmt.Sprint(m.Cached), m.PullText, m.SourceText})
		}
		caption := ""
		if c.Wrong > len(c.Mismatches) {
			caption = fmt.Sprintf("the first %d of %d", len(c.Mismatches), c.Wrong)
		}
		ts = append(ts, plainHTMLTable(id+"-content", "Pulls that returned other text than the source's completion", caption,
			[]string{"source", "trial", "start", "cached tokens", "pull's text", "source's text"}, cells))
	}
	if len(row.Verifications) > 0 {
		var cells [][]string
		for _, v := range row.Verifications {
			seen := "took effect"
			if !tookEffect(v) {
				seen = "did not take effect"
			}
			cells = append(cells, []string{v.Action, v.TargetName(), fmt.Sprintf("%.1f s", v.At.Seconds()), seen, fmt.Sprintf("%.2f s", v.After.Seconds()), v.Detail})
		}
		ts = append(ts, plainHTMLTable(id+"-verified", "Faults verified on the host", "", []string{"action", "source", "at", "result", "after", "detail"}, cells))
	}
	return ts
}

// htmlCharts are the row's charts: latency per source, then hit rate,
// time to first token and the decoder's metrics where there are any.
func htmlCharts(id string, run Run, row Row) []htmlChart {
	var cs []htmlChart
	for _, s := range chartSources(run) {
		cs = append(cs, htmlChart{ID: fmt.Sprintf("%s-latency-%d", id, s), Kind: "latency", Source: s,
			Title: fmt.Sprintf("%s: pull latency at start time", event.SourceName(s))})
	}
	if len(run.Samples) > 0 {
		cs = append(cs, htmlChart{ID: id + "-hit-rate", Kind: "hit_rate", Title: "Hit rate over time, per source"})
	}
	if len(row.TTFT) > 0 {
		cs = append(cs, htmlChart{ID: id + "-ttft", Kind: "ttft", Title: "Time to first token at start time"})
	}
	if len(run.html.decoder) > 0 {
		cs = append(cs, htmlChart{ID: id + "-decoder", Kind: "decoder", Title: "The decoder's /metrics"})
	}
	return cs
}

// htmlRowID is the id of the i-th row's section, its tables' and charts'
// prefix.
func htmlRowID(i int) string { return fmt.Sprintf("row-%d", i) }
