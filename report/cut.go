package report

import (
	"fmt"
	"strings"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
)

// A row's result (report.json's rows[].result and windows[].result): the
// verdict of a run that ran its course, pass, fail or not_judged; or
// interrupted, a run cut short before its planned end (a signal, a crash,
// an internal error) with no bound broken by then. A run cut short with a
// bound already broken is a fail: a verdict is never green, nor merely
// interrupted, while a bound is broken.
const (
	ResultPass        = "pass"
	ResultFail        = "fail"
	ResultNotJudged   = "not_judged"
	ResultInterrupted = "interrupted"
)

// truncatedReason is why a run whose events end without an end event was
// cut short.
const truncatedReason = "the run did not end: cut short"

// CutShortBy is why the run ended before its planned end, "" when it ran
// its course: its end event's message when the end's exit code says so
// (exitcode.CutShort), or that its events end without an end event (a
// crash, a SIGKILL). A run with no planned end (the dashboard's, until q)
// ends when it is interrupted: that is its end, not a cut.
func (r Run) CutShortBy() string {
	if r.Truncated {
		return truncatedReason
	}
	if !exitcode.RunCutShort(true, r.ExitCode, r.Info.Duration == 0) {
		return ""
	}
	// An internal error's message carries its stack: its first line says it.
	msg, _, _ := strings.Cut(r.EndMessage, "\n")
	if msg == "" {
		msg = fmt.Sprintf("ended with exit code %d", r.ExitCode)
	}
	return msg
}

// result is the run's result and, for a run cut short, why.
func (r Run) result() (result, cutShort string) {
	cutShort = r.CutShortBy()
	v := r.Verdict
	switch {
	case cutShort != "" && !check.Broken(v):
		return ResultInterrupted, cutShort
	case v.Passed:
		return ResultPass, cutShort
	case !v.Failed():
		return ResultNotJudged, cutShort
	}
	return ResultFail, cutShort
}

// windowResult is a window's result in a run cut short by cutShort ("":
// it ran its course): a window nothing to come could change any more
// (settled) keeps its own verdict, as one with a broken bound does; any
// other was cut short with it.
func windowResult(w event.WindowVerdict, cutShort string) string {
	switch {
	case cutShort != "" && !w.Settled && !check.WindowBroken(w):
		return ResultInterrupted
	case w.Passed:
		return ResultPass
	case w.NotJudged != "":
		return ResultNotJudged
	}
	return ResultFail
}

// resultOf is the result a row's verdict fields give, for a row made
// without one.
func resultOf(passed, notJudgedOnly bool) string {
	switch {
	case passed:
		return ResultPass
	case notJudgedOnly:
		return ResultNotJudged
	}
	return ResultFail
}

// resultWord is a result as the tables show it: pass, FAIL, not judged,
// INTERRUPTED.
func resultWord(result string) string {
	switch result {
	case ResultPass:
		return "pass"
	case ResultNotJudged:
		return "not judged"
	case ResultInterrupted:
		return "INTERRUPTED"
	}
	return "FAIL"
}

// resultText is the row's result as the tables show it.
func (r Row) resultText() string {
	if r.Result == "" {
		return resultWord(resultOf(r.Passed, r.notJudgedOnly()))
	}
	return resultWord(r.Result)
}

// writeCutShort is report.md's paragraph on a row cut short: why, and
// for an interrupted row the checks its unclosed windows left open.
func writeCutShort(b *strings.Builder, r Row) {
	if r.Result != ResultInterrupted {
		fmt.Fprintf(b, "\n**%s** was cut short (%s); a bound had already broken, so it reads FAIL.\n", r.title(), r.CutShort)
		return
	}
	fmt.Fprintf(b, "\n**%s** was cut short (%s) with no bound broken by then: INTERRUPTED, not judged on windows that never closed.\n", r.title(), r.CutShort)
	var open []string
	for _, c := range r.Checks {
		if !c.Passed {
			open = append(open, c.Name+": "+c.Detail)
		}
	}
	if len(open) > 0 {
		fmt.Fprintf(b, "\nLeft open:\n\n```\n%s\n```\n", strings.Join(open, "\n"))
	}
}
