package report

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"p2pfault/event"
)

// WhyRow is one line of a row's "why" table (report.json rows[].why): the
// pulls naming a window's faulted source, sent in the window (Sent "in")
// or in the recovery window after it ("after"), that one cause ended with
// one timer value. The cause is the sample's own (package cause, computed
// by the experiment as the pull ended); the report only counts.
type WhyRow struct {
	Window int         `json:"window"` // the window's index among the run's, from 0
	Kind   string      `json:"kind"`
	Source int         `json:"source"`
	Target string      `json:"target,omitempty"` // one rank's name when the fault acted on one
	StartS float64     `json:"start_s"`
	Sent   string      `json:"sent"` // "in" the window, or "after" it
	Cause  event.Cause `json:"cause"`
	Label  string      `json:"label"`
	N      int         `json:"n"`
	P50    float64     `json:"p50_s"`
	Max    float64     `json:"max_s"`
	Timer  string      `json:"timer,omitempty"`   // the setting behind the cause
	TimerS float64     `json:"timer_s,omitempty"` // its value in this run
}

// The two spans of a window's why table.
const (
	WhyIn    = "in"
	WhyAfter = "after"
)

// whyRows groups each window's faulted pulls by span, cause and timer; nil
// for a stream whose samples carry no cause (written before causes).
func whyRows(r Run) []WhyRow {
	if !slices.ContainsFunc(r.Samples, func(s event.Sample) bool { return s.Cause != "" }) {
		return nil
	}
	var out []WhyRow
	for i, w := range r.Windows {
		spans := []struct {
			name     string
			from, to time.Duration
		}{{WhyIn, w.Start, w.End}}
		if w.Recovers {
			spans = append(spans, struct {
				name     string
				from, to time.Duration
			}{WhyAfter, w.End, w.End + r.Info.Bounds.RecoveryWindow})
		}
		for _, sp := range spans {
			type key struct {
				cause event.Cause
				timer event.Timer
			}
			groups := map[key][]time.Duration{}
			for _, s := range r.Samples {
				if s.Source != w.Source || s.Start < sp.from || s.Start >= sp.to {
					continue
				}
				k := key{cause: s.Cause}
				if s.Timer != nil {
					k.timer = *s.Timer
				}
				groups[k] = append(groups[k], s.Latency)
			}
			keys := make([]key, 0, len(groups))
			for k := range groups {
				keys = append(keys, k)
			}
			slices.SortFunc(keys, func(a, b key) int {
				if c := causeOrder(a.cause) - causeOrder(b.cause); c != 0 {
					return c
				}
				return cmp.Compare(a.timer.Value, b.timer.Value)
			})
			for _, k := range keys {
				lat := groups[k]
				slices.Sort(lat)
				wr := WhyRow{Window: i, Kind: w.Kind, Source: w.Source, Target: w.Target, StartS: roundMillis(w.Start.Seconds()), Sent: sp.name,
					Cause: k.cause, Label: k.cause.Label(), N: len(lat),
					P50: roundMillis(lat[(len(lat)-1)/2].Seconds()), Max: roundMillis(lat[len(lat)-1].Seconds())}
				if k.timer.Name != "" {
					wr.Timer, wr.TimerS = k.timer.Name, roundMillis(k.timer.Value.Seconds())
				}
				out = append(out, wr)
			}
		}
	}
	return out
}

func causeOrder(c event.Cause) int {
	if i := slices.Index(event.Causes, c); i >= 0 {
		return i
	}
	return len(event.Causes)
}

// whyCaption says what the why table counts.
const whyCaption = "Why the faulted source's pulls took what they took, per fault window: the pulls naming it sent in the window, and in the recovery window after it, by what ended them (read from the pull's outcome and the engines' log lines as it ended; unknown where they do not say), with the timer behind the cause and its value in this run"

func whyHeader(rows []Row) []string {
	return append(keyHead(manyModes(rows)), "window", "sent", "cause", "pulls", "p50", "max", "timer")
}

func whyCells(rows []Row) [][]string {
	withMode := manyModes(rows)
	var out [][]string
	for _, r := range rows {
		for _, w := range r.Why {
			timer := notApplicable
			if w.Timer != "" {
				timer = w.Timer + " " + event.FormatSeconds(seconds(w.TimerS))
			}
			win := fmt.Sprintf("%d: %s %s at %.1f s", w.Window+1, w.Kind, event.Window{Source: w.Source, Target: w.Target}.TargetName(), w.StartS)
			out = append(out, append(r.keyCells(withMode), win, w.Sent, w.Label, fmt.Sprint(w.N),
				latencyCell(w.P50), latencyCell(w.Max), timer))
		}
	}
	return out
}

// WhyTable is the why table as aligned plain text; "" when no row has one.
func WhyTable(rows []Row) string {
	cells := whyCells(rows)
	if len(cells) == 0 {
		return ""
	}
	return plainTable(whyHeader(rows), cells)
}

// writeWhy appends report.md's why table.
func writeWhy(b *strings.Builder, rows []Row) {
	cells := whyCells(rows)
	if len(cells) == 0 {
		return
	}
	b.WriteString("\nWhy. " + whyCaption + ".\n\n")
	b.WriteString(markdownTable(whyHeader(rows), cells))
}

// UnknownShare is, over rows, how many faulted pulls (in a window or after
// it) the why tables attribute to unknown, of how many.
func UnknownShare(rows []Row) (unknown, all int) {
	for _, r := range rows {
		for _, w := range r.Why {
			all += w.N
			if w.Cause == event.CauseUnknown {
				unknown += w.N
			}
		}
	}
	return unknown, all
}
