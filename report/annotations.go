package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"p2pfault/event"
	"p2pfault/runfolder"
)

// FileAnnotations is the run's fault windows for Grafana.
const FileAnnotations = runfolder.Annotations

// Annotation is one fault window in Grafana's annotation format (the body
// of its HTTP API's POST /api/annotations): a region from Time to TimeEnd,
// in Unix milliseconds, tagged with the kind, the source, the arm and the
// window's verdict (passed or failed), its text the window and its failed
// checks.
type Annotation struct {
	Time    int64    `json:"time"`
	TimeEnd int64    `json:"timeEnd"`
	Tags    []string `json:"tags"`
	Text    string   `json:"text"`
}

// Annotations are every fault window of runs, one annotation each, in the
// order of the runs and of the windows' starts; none for a run without a
// wall clock of its t0 (no event came after it).
func Annotations(runs []Run) []Annotation {
	out := []Annotation{}
	for _, r := range runs {
		if r.T0.IsZero() {
			continue
		}
		cut := r.CutShortBy()
		for _, w := range r.judgedWindows() {
			end := w.End
			if end == 0 {
				end = max(r.RunEnd, w.Start) // open at the end: drawn to the end, as the charts do
			}
			verdict := "failed"
			switch windowResult(w, cut) {
			case ResultPass:
				verdict = "passed"
			case ResultInterrupted:
				verdict = ResultInterrupted // cut short before it was judged
			}
			text := fmt.Sprintf("%s on %s (%s), window %d: %s", w.Kind, event.SourceName(w.Source), r.Name(), w.Index, verdict)
			var failed []string
			for _, c := range w.Checks {
				if !c.Passed {
					failed = append(failed, c.Name+": "+c.Detail)
				}
			}
			if len(failed) > 0 {
				text += "\n" + strings.Join(failed, "\n")
			}
			out = append(out, Annotation{
				Time:    r.T0.Add(w.Start).UnixMilli(),
				TimeEnd: r.T0.Add(end).UnixMilli(),
				Tags:    []string{w.Kind, event.SourceName(w.Source), r.Info.Arm, verdict},
				Text:    text,
			})
		}
	}
	return out
}

// judgedWindows are the run's fault windows with their verdicts: the
// verdict's windows, or for a stream whose verdict has none, each window
// with the run's verdict.
func (r Run) judgedWindows() []event.WindowVerdict {
	if len(r.Verdict.Windows) > 0 {
		return r.Verdict.Windows
	}
	var out []event.WindowVerdict
	for i, w := range r.Windows {
		out = append(out, event.WindowVerdict{Index: i + 1, Kind: w.Kind, Source: w.Source, Start: w.Start, End: w.End,
			Passed: r.Verdict.Passed, Checks: r.Verdict.Checks})
	}
	return out
}

// WriteAnnotations writes runs' annotations as one JSON array.
func WriteAnnotations(w io.Writer, runs []Run) error {
	b, err := json.MarshalIndent(Annotations(runs), "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
