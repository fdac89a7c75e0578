package report

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// WindowRow is one fault window of a run judged on its own, as
// report.json gives it (rows[].windows[]): a run of more than one window
// (a nemesis) has one per window, in start order.
type WindowRow struct {
	Index   int     `json:"index"`
	Kind    string  `json:"kind"`
	Source  int     `json:"source"`
	StartS  float64 `json:"start_s"`
	LengthS float64 `json:"length_s"` // to the run's end for a window still open then
	Open    bool    `json:"open,omitempty"`
	Passed  bool    `json:"passed"`
	// Result is pass, fail, not_judged or interrupted: in a run cut short,
	// a window not settled by then and with no bound broken (cut.go).
	Result string `json:"result"`
	// NotJudged is why the window could not be judged ("": it was).
	NotJudged string       `json:"not_judged,omitempty"`
	Checks    []CheckRow   `json:"checks"`
	Times     event.Times  `json:"times"`
	Faulted   FaultedRow   `json:"faulted"`
	Healthy   HealthyRow   `json:"healthy"`
	Recovery  *RecoveryRow `json:"recovery,omitempty"`
}

// windowRows are the verdict's windows as rows; none for a run of one
// window (its row is the seed's), unless a nemesis drew it.
func windowRows(r Run) []WindowRow {
	ws := r.Verdict.Windows
	if len(ws) < 2 && r.Info.Nemesis == "" {
		return nil
	}
	out := make([]WindowRow, 0, len(ws))
	cutShort := r.CutShortBy()
	for _, w := range ws {
		wr := WindowRow{Index: w.Index, Kind: w.Kind, Source: w.Source, StartS: roundMillis(w.Start.Seconds()),
			Passed: w.Passed, Result: windowResult(w, cutShort), NotJudged: w.NotJudged, Times: w.Times}
		if wr.Result == ResultInterrupted {
			wr.Passed = false
		}
		end := w.End
		if end == 0 {
			wr.Open, end = true, max(r.RunEnd, w.Start)
		}
		wr.LengthS = roundMillis((end - w.Start).Seconds())
		for _, c := range w.Checks {
			wr.Checks = append(wr.Checks, CheckRow{Name: c.Name, Passed: c.Passed, Detail: c.Detail})
		}
		f, h := w.Summary.Faulted, w.Summary.Healthy
		wr.Faulted = FaultedRow{N: f.N, Pulled: f.Pulled, P50: f.P50.Seconds(), Max: f.Max.Seconds()}
		wr.Healthy = HealthyRow{N: h.N, Pulled: h.Pulled, Max: h.Max.Seconds()}
		if w.Recovers {
			wr.Recovery = &RecoveryRow{N: w.Summary.Recovery.N, Pulled: w.Summary.Recovery.Pulled}
		}
		out = append(out, wr)
	}
	return out
}

// kindRows are the verdict's per-kind summary, when it has windows rows.
func kindRows(r Run) []event.KindSummary {
	if len(windowRows(r)) == 0 {
		return nil
	}
	return r.Verdict.Kinds
}

// windowsHeader is the per-window table's header; with several rows (arms)
// each line starts with its arm and case.
func windowsHeader(many bool) []string {
	h := []string{"#", "kind", "source", "start", "length", "result"}
	if many {
		h = append([]string{"arm", "case"}, h...)
	}
	for _, c := range check.WindowColumns {
		h = append(h, c.Head)
	}
	return append(h, "detect_s", "recover_s")
}

// windowsCells are the per-window table's lines: pass, FAIL, empty (the
// check's window held no pull) or – (the check does not apply to the
// kind, e.g. recovery after a remove).
func windowsCells(rows []Row) [][]string {
	many := len(rows) > 1
	var out [][]string
	for _, r := range rows {
		for _, w := range r.Windows {
			length := fmtSecs(w.LengthS)
			if w.Open {
				length += "+"
			}
			line := []string{fmt.Sprint(w.Index), w.Kind, event.SourceName(w.Source), fmtSecs(w.StartS), length, w.resultText()}
			if many {
				line = append([]string{r.Arm, r.Case}, line...)
			}
			for _, c := range check.WindowColumns {
				line = append(line, checkCell(w, c.Name))
			}
			out = append(out, append(line, check.FormatSeconds(w.Times.DetectS), check.FormatSeconds(w.Times.RecoverS)))
		}
	}
	return out
}

// resultText is the window's result as the table shows it.
func (w WindowRow) resultText() string {
	if w.Result == "" {
		return result(w.Passed, w.NotJudged != "")
	}
	return resultWord(w.Result)
}

func checkCell(w WindowRow, name string) string {
	for _, c := range w.Checks {
		if c.Name != name {
			continue
		}
		switch {
		case c.Passed:
			return "pass"
		case strings.HasPrefix(c.Detail, "empty"):
			return "empty"
		}
		return "FAIL"
	}
	return notApplicable
}

// result is a verdict's word: pass, FAIL, or not judged (a window whose
// source had stopped hitting before its fault fired, check/baseline.go).
func result(ok, notJudged bool) string {
	switch {
	case ok:
		return "pass"
	case notJudged:
		return "not judged"
	}
	return "FAIL"
}

// fmtSecs shows seconds as a duration rounded to the 0.1 s: "1m20.4s".
func fmtSecs(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(100 * time.Millisecond).String()
}

// kindsHeader is the per-kind summary's header.
func kindsHeader(many bool) []string {
	h := []string{"kind", "windows", "passed", "failed", "worst detect_s", "worst recover_s"}
	if many {
		h = append([]string{"arm", "case"}, h...)
	}
	return h
}

// kindsCells are the per-kind summary's lines. The worst time is "not
// detected" (or "not recovered") when a window never got one, with the
// count and the worst time of the others.
func kindsCells(rows []Row) [][]string {
	many := len(rows) > 1
	var out [][]string
	for _, r := range rows {
		for _, k := range r.Kinds {
			failed := fmt.Sprint(k.Failed)
			if k.NotJudged > 0 {
				failed += fmt.Sprintf(" (%d not judged)", k.NotJudged)
			}
			line := []string{k.Kind, fmt.Sprint(k.Count), fmt.Sprint(k.Passed), failed,
				worst(k.WorstDetectS, k.NotDetected, "not detected"), worst(k.WorstRecoverS, k.NotRecovered, "not recovered")}
			if many {
				line = append([]string{r.Arm, r.Case}, line...)
			}
			out = append(out, line)
		}
	}
	return out
}

func worst(s *float64, never int, what string) string {
	switch {
	case never == 0:
		return check.FormatSeconds(s)
	case s == nil:
		return fmt.Sprintf("%s ×%d", what, never)
	}
	return fmt.Sprintf("%s ×%d, else %s", what, never, check.FormatSeconds(s))
}

// hasWindows says whether any row has a per-window table.
func hasWindows(rows []Row) bool {
	for _, r := range rows {
		if len(r.Windows) > 0 {
			return true
		}
	}
	return false
}

// WindowsTable is the per-window table and the per-kind summary as aligned
// plain text, for rows that have them ("" for none: a run of one
// scripted fault prints the seed's table alone).
func WindowsTable(rows []Row) string {
	if !hasWindows(rows) {
		return ""
	}
	many := len(rows) > 1
	return plainTable(windowsHeader(many), windowsCells(rows)) + "\n" + plainTable(kindsHeader(many), kindsCells(rows))
}

// windowFailures are the failing checks of every failed window, one line
// each: "window 3 (stall source-0 at 1m20.4s): faulted_max: ...".
func windowFailures(r Row) []string {
	var out []string
	for _, w := range r.Windows {
		if w.NotJudged != "" || w.Result == ResultInterrupted {
			continue // its checks are not failures: the row's NotJudged, or its cut, says why
		}
		for _, c := range w.Checks {
			if !c.Passed {
				out = append(out, fmt.Sprintf("window %d (%s %s at %s): %s: %s", w.Index, w.Kind, event.SourceName(w.Source), fmtSecs(w.StartS), c.Name, c.Detail))
			}
		}
	}
	return out
}

// WindowFailures are a row's failed windows' checks, for the headless
// output under the tables.
func (r Row) WindowFailures() []string { return windowFailures(r) }

// windowsCaption says how the per-window table judges.
const windowsCaption = "each fault window judged on its own, on the pulls started in it and in its recovery window (up to the next window): a pull is judged by its start, so one that overlaps two windows is judged in the first; pass, FAIL, empty (no pull to judge) or – (the check does not apply to the kind)"

// writeWindows adds the per-window table, the per-kind summary and the
// failed windows' checks to report.md.
func writeWindows(b *strings.Builder, rows []Row) {
	if !hasWindows(rows) {
		return
	}
	many := len(rows) > 1
	b.WriteString("\n**Fault by fault** (" + windowsCaption + "):\n\n")
	b.WriteString(markdownTable(windowsHeader(many), windowsCells(rows)))
	b.WriteString("\n**Per kind:**\n\n")
	b.WriteString(markdownTable(kindsHeader(many), kindsCells(rows)))
	for _, r := range rows {
		if fails := windowFailures(r); len(fails) > 0 {
			fmt.Fprintf(b, "\n**%s / %s**, failed windows:\n\n```\n%s\n```\n", r.Arm, r.Case, strings.Join(fails, "\n"))
		}
	}
}
