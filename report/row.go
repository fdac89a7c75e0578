package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"p2pfault/event"
)

// Row is one row of the seed's table: one arm × case. Its JSON is the
// stable shape of DESIGN.md that CI reads; the fields tagged "-" feed the
// top-level keys of report.json and the notes of report.md.
type Row struct {
	Arm  string `json:"arm"`
	Mode string `json:"mode"` // p2p or pd (mode.go)
	Case string `json:"case"`
	// Settings are the engine settings a slice's --sweep gave the row
	// (sweep.go); absent without a sweep.
	Settings []event.Setting `json:"settings,omitempty"`
	Passed   bool            `json:"passed"`
	// Result is pass, fail, not_judged or interrupted (cut.go): a run cut
	// short with no bound broken by then is interrupted, not failed, and
	// its passed is false; CutShort says why it was cut short (its end
	// event's message, or that its events end without one), absent for a
	// run that ran its course.
	Result   string `json:"result"`
	CutShort string `json:"cut_short,omitempty"`
	// NotJudged names the fault windows that could not be judged, and
	// why; a row with one and no failed check is "not judged" (exit 3).
	NotJudged []string   `json:"not_judged,omitempty"`
	Checks    []CheckRow `json:"checks"`
	Faulted   FaultedRow `json:"faulted"`
	// AfterDetect is the faulted pulls check 3 takes the median of (those
	// started the detect bound after the fault on); absent for a run of
	// several windows and for streams from before it.
	AfterDetect *FaultedRow  `json:"after_detect,omitempty"`
	Healthy     HealthyRow   `json:"healthy"`
	Recovery    *RecoveryRow `json:"recovery,omitempty"` // absent when the fault does not recover (remove)
	TTFT        []TTFTRow    `json:"ttft,omitempty"`     // streamed runs only (ttft.go)
	// Times are the judged fault's detect_s and recover_s (null when it
	// never happened); absent for a run without a fault.
	Times *event.Times `json:"times,omitempty"`
	// Verifications are the fault actions checked on the host (check
	// fault_took_effect); absent when none was.
	Verifications []event.Verification `json:"verifications,omitempty"`
	// Decoder is the decoder's own /metrics over the fault and recovery
	// windows (metrics.go); absent when it was not scraped.
	Decoder *DecoderMetrics `json:"decoder_metrics,omitempty"`
	// Loads are the fault kinds' own loads (busy) and Lookup the
	// decoder's lookup delay per span of the run (load.go); absent when
	// there was none, or the decoder does not export the delay.
	Loads  []LoadRow   `json:"loads,omitempty"`
	Lookup []LookupRow `json:"lookup_delay,omitempty"`
	// Steady is each source's pulls outside every fault window
	// (steady.go); absent only in a report of a stream with no samples.
	Steady []SteadyRow `json:"steady,omitempty"`
	// Ranks break the pulls naming a source of several data-parallel
	// ranks down by rank (ranks.go); absent when no source has several.
	Ranks []RankRow `json:"ranks,omitempty"`
	// Content is the content check's counts and first mismatches
	// (content.go); absent when texts were not compared.
	Content *ContentRow `json:"content,omitempty"`
	// Windows are every fault window judged on its own and Kinds what
	// they came to per kind (windows.go): a run of more than one window
	// (a nemesis); absent for one scripted fault.
	Windows []WindowRow         `json:"windows,omitempty"`
	Kinds   []event.KindSummary `json:"kinds,omitempty"`
	// Why is what ended each window's faulted pulls, by cause (why.go);
	// absent for a stream whose samples carry no cause.
	Why []WhyRow `json:"why,omitempty"`
	// WireWhy is the why table from the links' messages alone, and
	// WireAgreement how those causes agree with Why's (a run with --link;
	// wire.go).
	WireWhy       []WhyRow       `json:"why_wire,omitempty"`
	WireAgreement *WireAgreement `json:"wire_agreement,omitempty"`
	// Parked is each source's parked stores over the run (parked.go);
	// absent when the sources do not export them, or none was parked and
	// no check judged them.
	Parked []ParkedRow `json:"parked_stores,omitempty"`

	TimeScale  float64   `json:"-"`
	Truncated  bool      `json:"-"`
	Recomputed bool      `json:"-"`
	First      time.Time `json:"-"` // wall clock of the run's first event
	Last       time.Time `json:"-"` // ... and of its last
}

// CheckRow is one check's outcome.
type CheckRow struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail"`
	// Pending is how many pulls in flight the check counted (by their
	// age so far); absent when none.
	Pending int `json:"pending,omitempty"`
}

// FaultedRow summarises the pulls naming the faulted source in the window.
type FaultedRow struct {
	N      int     `json:"n"`
	Pulled int     `json:"pulled"`
	P50    float64 `json:"p50_s"`
	Max    float64 `json:"max_s"`
}

// HealthyRow summarises the pulls naming the other sources in the window.
type HealthyRow struct {
	N      int     `json:"n"`
	Pulled int     `json:"pulled"`
	Max    float64 `json:"max_s"`
}

// RecoveryRow summarises the pulls naming the faulted source after it.
type RecoveryRow struct {
	N      int `json:"n"`
	Pulled int `json:"pulled"`
}

// Row is the run's row of the table.
func (r Run) Row() Row {
	v := r.Verdict
	row := Row{
		Arm:        r.Info.Arm,
		Mode:       event.ModeOf(r.Info.Mode),
		Case:       r.Info.Case,
		Settings:   r.Info.Settings,
		Passed:     v.Passed,
		NotJudged:  v.NotJudged,
		Checks:     make([]CheckRow, 0, len(v.Checks)),
		TimeScale:  r.Info.TimeScale,
		Truncated:  r.Truncated,
		Recomputed: r.Recomputed,
		First:      r.First,
		Last:       r.Last,
	}
	for _, c := range v.Checks {
		row.Checks = append(row.Checks, CheckRow{Name: c.Name, Passed: c.Passed, Detail: c.Detail, Pending: c.Pending})
	}
	row.Result, row.CutShort = r.result()
	if row.Result == ResultInterrupted {
		row.Passed = false // never green for a run that did not end
	}
	f, h := v.Summary.Faulted, v.Summary.Healthy
	row.Faulted = FaultedRow{N: f.N, Pulled: f.Pulled, P50: f.P50.Seconds(), Max: f.Max.Seconds()}
	row.Healthy = HealthyRow{N: h.N, Pulled: h.Pulled, Max: h.Max.Seconds()}
	if a := v.Summary.AfterDetect; a.N > 0 {
		row.AfterDetect = &FaultedRow{N: a.N, Pulled: a.Pulled, P50: a.P50.Seconds(), Max: a.Max.Seconds()}
	}
	if r.HasWindow && r.Window.Recovers {
		row.Recovery = &RecoveryRow{N: v.Summary.Recovery.N, Pulled: v.Summary.Recovery.Pulled}
	}
	row.TTFT = ttftRows(r)
	if r.HasWindow {
		// FromEvents gives a run with a window its times: the stream's
		// verdict's, else the judge's.
		row.Times = r.Verdict.Times
	}
	row.Verifications = r.Verifications
	row.Decoder = decoderMetrics(r)
	row.Loads, row.Lookup = loadRows(r), lookupRows(r)
	row.Steady = steadyRows(v)
	row.Ranks = rankRows(v, r.Info)
	row.Content = contentRow(r)
	row.Parked = parkedRows(r, row.Checks)
	row.Windows, row.Kinds = windowRows(r), kindRows(r)
	row.Why = whyRows(r)
	row.WireWhy, row.WireAgreement = r.wireWhy, r.wireAgreement
	return row
}

// Rows gives each run's row, in order.
func Rows(runs []Run) []Row {
	rows := make([]Row, len(runs))
	for i, r := range runs {
		rows[i] = r.Row()
	}
	return rows
}

// SeedLine is the seed's summary line of the row's faulted pulls.
func (r Row) SeedLine() string {
	return event.Stats{N: r.Faulted.N, Pulled: r.Faulted.Pulled, P50: seconds(r.Faulted.P50), Max: seconds(r.Faulted.Max)}.SeedLine("faulted")
}

// document is report.json.
type document struct {
	Rows      []Row     `json:"rows"`
	TimeScale float64   `json:"time_scale"`
	WallS     float64   `json:"wall_s"`
	Truncated bool      `json:"truncated"`
	Generated time.Time `json:"generated"`
}

// WriteJSON writes report.json for rows: "rows" plus "time_scale" (the
// first row's: a slice runs every row at one scale), "wall_s" (first event
// of any row to last of any: rows of a slice run side by side), "truncated"
// (any row) and "generated". Generated is the wall clock of the newest
// run's last event rather than now, so a report rebuilt from events.jsonl
// is byte for byte the one the run wrote.
func WriteJSON(w io.Writer, rows ...Row) error {
	doc := document{Rows: slices.Clone(rows)} // the caller's rows stay as they are
	if doc.Rows == nil {
		doc.Rows = []Row{}
	}
	first, last := span(rows)
	if len(rows) > 0 {
		doc.TimeScale = rows[0].TimeScale
	}
	doc.WallS = roundMillis(last.Sub(first).Seconds())
	doc.Generated = last.UTC()
	for i, r := range rows {
		doc.Truncated = doc.Truncated || r.Truncated
		if r.Result == "" {
			// A row made without a run (a test's): its verdict fields say it.
			doc.Rows[i].Result = resultOf(r.Passed, r.notJudgedOnly())
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write report.json: %w", err)
	}
	return nil
}

// header is the seed's table header, with a mode column when the rows
// are of several modes (mode.go).
func header(withMode keyCols) []string {
	return append(keyHead(withMode), "result", "faulted source p50 / max", "healthy source pulled, max", "faulted source pulled after recovery")
}

// notJudgedOnly reports whether the row did not pass only because a
// window could not be judged: no check of it failed.
func (r Row) notJudgedOnly() bool {
	if r.Passed || len(r.NotJudged) == 0 {
		return false
	}
	for _, c := range r.Checks {
		if !c.Passed {
			return false
		}
	}
	return true
}

// cells is the row as the seed's table shows it.
func (r Row) cells(withMode keyCols) []string {
	result := r.resultText()
	faulted, healthy, recovery := notApplicable, notApplicable, notApplicable
	if r.Faulted.N > 0 {
		faulted = fmt.Sprintf("%.2f s / %.2f s", r.Faulted.P50, r.Faulted.Max)
	}
	if r.Healthy.N > 0 {
		healthy = fmt.Sprintf("%d/%d, %.2f s", r.Healthy.Pulled, r.Healthy.N, r.Healthy.Max)
	}
	if r.Recovery != nil {
		recovery = fmt.Sprintf("%d/%d", r.Recovery.Pulled, r.Recovery.N)
	}
	return append(r.keyCells(withMode), result, faulted, healthy, recovery)
}

const notApplicable = "–"

// WriteMarkdown writes report.md: the seed's table, the times table, then for each failed
// row its failing checks and the seed's summary line, then the time scale
// and wall time, and a note for every truncated run.
func WriteMarkdown(w io.Writer, rows ...Row) error {
	var b strings.Builder
	withMode := manyModes(rows)
	b.WriteString("| " + strings.Join(header(withMode), " | ") + " |\n")
	b.WriteString(strings.Repeat("|---", len(header(withMode))) + "|\n")
	for _, r := range rows {
		cells := r.cells(withMode)
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	// The judged fault's detect and recover times, a table of their own
	// so the seed's stays as it is.
	b.WriteString("\n" + markdownTable(timesHeader(withMode), timesCells(rows, withMode)))
	writeContent(&b, rows)
	writeWindows(&b, rows)
	for _, r := range rows {
		if r.CutShort != "" {
			writeCutShort(&b, r)
		}
		if r.Passed || r.Result == ResultInterrupted {
			continue
		}
		if len(r.NotJudged) > 0 {
			fmt.Fprintf(&b, "\n**%s** could not be judged on every window:\n\n```\n%s\n```\n", r.title(), strings.Join(r.NotJudged, "\n"))
			if r.notJudgedOnly() {
				continue
			}
		}
		fmt.Fprintf(&b, "\n**%s** failed:\n\n```\n%s\n", r.title(), r.SeedLine())
		for _, c := range r.Checks {
			if !c.Passed {
				fmt.Fprintf(&b, "%s: %s\n", c.Name, c.Detail)
			}
		}
		b.WriteString("```\n")
	}
	writeWhy(&b, rows)
	writeSteady(&b, rows)
	writeRanks(&b, rows)
	writeDecoder(&b, rows)
	writeParked(&b, rows)
	writeLoads(&b, rows)
	writeVerifications(&b, rows)
	writeTTFT(&b, rows)
	first, last := span(rows)
	scale := 0.0
	if len(rows) > 0 {
		scale = rows[0].TimeScale
	}
	fmt.Fprintf(&b, "\nTime scale %g (the run's durations and bounds were multiplied by it; times above are real seconds). Wall time %.1f s.\n",
		scale, last.Sub(first).Seconds())
	for _, r := range rows {
		if !r.Truncated {
			continue
		}
		fmt.Fprintf(&b, "\n> **Truncated:** the events of %s end without an end event or with a partial line: the run crashed or was still running.", r.title())
		if r.Recomputed {
			b.WriteString(" Its checks were evaluated from the samples logged before that.")
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write report.md: %w", err)
	}
	return nil
}

// Table is the seed's table as aligned plain text for a terminal.
func Table(rows []Row) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	withMode := manyModes(rows)
	fmt.Fprintln(tw, strings.Join(header(withMode), "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(withMode), "\t"))
	}
	tw.Flush()
	// tabwriter pads the last column too when asked to align it; trim so
	// the lines end in their text.
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// Tables is what a terminal shows of rows: the seed's table, the times
// table, the why table, the steady-state table (when a row has one), the
// per-rank table (a source of several data-parallel ranks), when texts
// were compared the content table, and after a busy fault the load and
// the decoder's lookup delay (load.go), a blank line between each.
func Tables(rows []Row) string {
	out := Table(rows) + "\n" + TimesTable(rows)
	for _, t := range []string{WhyTable(rows), WireWhyTable(rows), SteadyTable(rows), RankTable(rows), ContentTable(rows), LoadTable(rows), LookupTable(rows)} {
		if t != "" {
			out += "\n" + t
		}
	}
	return out
}

// span is the earliest first event and the latest last event of rows.
func span(rows []Row) (first, last time.Time) {
	for _, r := range rows {
		if !r.First.IsZero() && (first.IsZero() || r.First.Before(first)) {
			first = r.First
		}
		if r.Last.After(last) {
			last = r.Last
		}
	}
	if first.IsZero() || last.Before(first) {
		return last, last
	}
	return first, last
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

func roundMillis(s float64) float64 { return math.Round(s*1e3) / 1e3 }
