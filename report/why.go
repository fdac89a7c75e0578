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
// pulls naming a window's faulted source, in flight when its fault fired
// (Sent "before": sent before the window, ended after its start; #56828's
// loads caught mid-transfer), sent in the window ("in") or in the recovery
// window after it ("after"), that one cause ended with
// one timer value — on a source of several data-parallel ranks, those
// pinned to one rank (Rank): each rank is a session of its own on the
// decoder (sim/MODEL.md mechanism 27), so one fault ends its ranks' pulls
// by different causes (#56828). The cause is the sample's own (package
// cause, computed by the experiment as the pull ended); the report only
// counts.
type WhyRow struct {
	Window int     `json:"window"` // the window's index among the run's, from 0
	Kind   string  `json:"kind"`
	Source int     `json:"source"`
	Target string  `json:"target,omitempty"` // one rank's name when the fault acted on one
	StartS float64 `json:"start_s"`
	Sent   string  `json:"sent"` // "before" (in flight at its start), "in" the window, or "after" it
	// Rank is the data-parallel rank the pulls were pinned to (Sample.Rank)
	// on a source of several (RunInfo.SourceRanks); nil, absent, on a
	// source of one.
	Rank   *int        `json:"rank,omitempty"`
	Cause  event.Cause `json:"cause"`
	Label  string      `json:"label"`
	N      int         `json:"n"`
	P50    float64     `json:"p50_s"`
	Max    float64     `json:"max_s"`
	Timer  string      `json:"timer,omitempty"`   // the setting behind the cause
	TimerS float64     `json:"timer_s,omitempty"` // its value in this run
}

// The three spans of a window's why table.
const (
	WhyBefore = "before"
	WhyIn     = "in"
	WhyAfter  = "after"
)

// whyRows groups each window's faulted pulls by span, cause and timer (and
// rank, on a source of several); nil for a stream whose samples carry no
// cause (written before causes).
func whyRows(r Run) []WhyRow {
	if !slices.ContainsFunc(r.Samples, func(s event.Sample) bool { return s.Cause != "" }) {
		return nil
	}
	var out []WhyRow
	for i, w := range r.Windows {
		ranked := event.RanksOf(r.Info.SourceRanks, w.Source) > 1
		caught := func(s event.Sample) bool { return s.Start < w.Start && s.Start+s.Latency > w.Start }
		out = append(out, whySpan(r.Samples, i, w, WhyBefore, prevEnd(r.Windows, i), w.Start, ranked, caught)...)
		out = append(out, whySpan(r.Samples, i, w, WhyIn, w.Start, w.End, ranked, nil)...)
		if w.Recovers {
			out = append(out, whySpan(r.Samples, i, w, WhyAfter, w.End, w.End+r.Info.Bounds.RecoveryWindow, ranked, nil)...)
		}
	}
	return out
}

// prevEnd is where the "before" span of window i may start: the end of the
// last window on its source before it (a pull sent while that one was in
// force is that window's), else the run's start.
func prevEnd(ws []event.Window, i int) time.Duration {
	var from time.Duration
	for _, w := range ws[:i] {
		if w.Source == ws[i].Source && w.End > from && w.End <= ws[i].Start {
			from = w.End
		}
	}
	return from
}

// whyKey is one line of a span: a cause, its timer, and on a ranked
// source the rank (-1 on a source of one rank).
type whyKey struct {
	rank  int
	cause event.Cause
	timer event.Timer
}

// whySpan is the lines of window i's span (span "before", "in" or
// "after": its pulls sent in [from, to), and of those only the ones keep
// holds when it is set), by rank (ranked: the source has several), then in
// the causes' order, then by timer value.
func whySpan(samples []event.Sample, i int, w event.Window, span string, from, to time.Duration, ranked bool, keep func(event.Sample) bool) []WhyRow {
	groups := map[whyKey][]time.Duration{}
	for _, s := range samples {
		if s.Source != w.Source || s.Start < from || s.Start >= to || keep != nil && !keep(s) {
			continue
		}
		k := whyKey{rank: -1, cause: s.Cause}
		if ranked {
			k.rank = s.Rank
		}
		if s.Timer != nil {
			k.timer = *s.Timer
		}
		groups[k] = append(groups[k], s.Latency)
	}
	keys := make([]whyKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b whyKey) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(causeOrder(a.cause), causeOrder(b.cause)),
			cmp.Compare(a.timer.Value, b.timer.Value))
	})
	out := make([]WhyRow, 0, len(keys))
	for _, k := range keys {
		lat := groups[k]
		slices.Sort(lat)
		wr := WhyRow{Window: i, Kind: w.Kind, Source: w.Source, Target: w.Target, StartS: roundMillis(w.Start.Seconds()), Sent: span,
			Cause: k.cause, Label: k.cause.Label(), N: len(lat),
			P50: roundMillis(lat[(len(lat)-1)/2].Seconds()), Max: roundMillis(lat[len(lat)-1].Seconds())}
		if k.rank >= 0 {
			wr.Rank = &k.rank
		}
		if k.timer.Name != "" {
			wr.Timer, wr.TimerS = k.timer.Name, roundMillis(k.timer.Value.Seconds())
		}
		out = append(out, wr)
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
const whyCaption = "Why the faulted source's pulls took what they took, per fault window: the pulls naming it in flight when the fault fired (sent before), sent in the window, and in the recovery window after it, by what ended them (read from the pull's outcome and the engines' log lines as it ended; unknown where they do not say), with the timer behind the cause and its value in this run"

// whyRankCaption is added to the caption when the table has a rank column.
const whyRankCaption = "; on a source of several data-parallel ranks, by the rank the pulls were pinned to (each rank is a session of its own on the decoder)"

// whyByRank says whether any row's why table breaks a source down by rank:
// the table then has a rank column (a run without ranked sources prints
// none).
func whyByRank(rows []Row) bool {
	for _, r := range rows {
		if slices.ContainsFunc(r.Why, func(w WhyRow) bool { return w.Rank != nil }) {
			return true
		}
	}
	return false
}

func whyHeader(rows []Row) []string {
	h := append(keyHead(manyModes(rows)), "window", "sent")
	if whyByRank(rows) {
		h = append(h, "rank")
	}
	return append(h, "cause", "pulls", "p50", "max", "timer")
}

func whyCells(rows []Row) [][]string {
	withMode, byRank := manyModes(rows), whyByRank(rows)
	var out [][]string
	for _, r := range rows {
		for _, w := range r.Why {
			timer := notApplicable
			if w.Timer != "" {
				timer = w.Timer + " " + event.FormatSeconds(seconds(w.TimerS))
			}
			win := fmt.Sprintf("%d: %s %s at %.1f s", w.Window+1, w.Kind, event.Window{Source: w.Source, Target: w.Target}.TargetName(), w.StartS)
			c := append(r.keyCells(withMode), win, w.Sent)
			if byRank {
				rank := notApplicable // a source of one rank beside a ranked one
				if w.Rank != nil {
					rank = event.RankName(w.Source, *w.Rank)
				}
				c = append(c, rank)
			}
			out = append(out, append(c, w.Label, fmt.Sprint(w.N), latencyCell(w.P50), latencyCell(w.Max), timer))
		}
	}
	return out
}

// WhyTable is the why table as aligned plain text; "" when no row has one.
func WhyTable(rows []Row) string { return whyTable(rows).plain() }

// writeWhy appends report.md's why table.
func writeWhy(b *strings.Builder, rows []Row) { whyTable(rows).writeMarkdown(b) }

func whyTable(rows []Row) table {
	caption := whyCaption
	if whyByRank(rows) {
		caption += whyRankCaption
	}
	return table{whyHeader(rows), whyCells(rows), "Why. " + caption + "."}
}
