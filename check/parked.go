package check

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/event"
)

// NameParkedStores: after a fault on a decoder ends (or, for one that
// lasts the run, after it began), each source's parked stores and the
// blocks they pin come back to their level before the fault within the
// tier's unbound_store_timeout_s plus a margin. A decoder that stalls or
// dies holds stores on every source, parked for a fetch that never comes;
// vLLM's producer reaps them after unbound_store_timeout_s
// (manager.py _reap_unbound_stores, vllm #53453), or they leak.
const NameParkedStores = "parked_stores_return_to_baseline"

// ParkedPoint is one reading of a source's parked stores and the blocks
// they pin, At since t0.
type ParkedPoint struct {
	At             time.Duration
	Stores, Blocks float64
}

// ParkedMargin is what the check allows beyond the unbound-store timeout:
// the reap runs on the producer's next step and is seen at the next
// scrape (once a second), and a store parked just as the fault ended is
// reaped a timeout after it.
func ParkedMargin(timeout time.Duration) time.Duration { return 5*time.Second + timeout/10 }

// ParkedChecks judges every decoder window ws over each source's readings
// (series, by source name, in the order of sources): its stores must be
// back at or below their highest level in the lookback before the fault
// within bound of the fault's end. No result when no source exports the
// series (vLLM does not), nor for a window still open.
func ParkedChecks(sources []string, series map[string][]ParkedPoint, ws []DecoderWindow, bound, lookback, runEnd time.Duration) []event.Result {
	var out []event.Result
	for _, w := range ws {
		if r, ok, _ := ParkedWindow(sources, series, w, bound, lookback, runEnd); ok {
			out = append(out, r)
		}
	}
	return out
}

// ParkedWindow is ParkedChecks of the one window w: ok is false when it
// gives no result; settled when every source's stores were back (in time
// or late), which no later reading changes, so a caller may keep the
// result and let go of the readings from before the next window's
// lookback (experiment's verdicts do).
func ParkedWindow(sources []string, series map[string][]ParkedPoint, w DecoderWindow, bound, lookback, runEnd time.Duration) (r event.Result, ok, settled bool) {
	exported := false
	for _, s := range sources {
		exported = exported || len(series[s]) > 0
	}
	if !exported {
		return event.Result{}, false, false
	}
	from := w.End
	if !w.Recovers && w.End == 0 {
		from = w.Start // lasts the run: its sessions died when it began
	}
	if from == 0 {
		return event.Result{}, false, false
	}
	r = event.Result{Name: NameParkedStores, Passed: true}
	settled = true
	var parts []string
	for _, s := range sources {
		v := parkedVerdict(series[s], w.Start, from, bound, lookback, runEnd)
		r.Passed = r.Passed && v.ok
		r.Empty = r.Empty || v.empty
		settled = settled && v.back
		parts = append(parts, s+": "+v.detail)
	}
	what := fmt.Sprintf("%s %s at %.1fs", w.Kind, w.target(), w.Start.Seconds())
	r.Detail = fmt.Sprintf("%s: each source's parked stores back to their level before it within %.1fs of %.1fs (%s)",
		what, bound.Seconds(), from.Seconds(), strings.Join(parts, "; "))
	return r, true, settled
}

type parkedResult struct {
	ok, empty bool
	back      bool // the stores were back (or the series is not exported): final
	detail    string
}

// parkedVerdict is one source's part of the check: its baseline (the
// highest reading in the lookback before start), its peak from start until
// they were back (or to the last reading), and the first reading from
// from on at or below the baseline. The peak stops at that reading so
// that the part is final once they are back: a later fault's stores are
// that fault's peak, not this one's.
func parkedVerdict(pts []ParkedPoint, start, from, bound, lookback, runEnd time.Duration) parkedResult {
	if len(pts) == 0 {
		return parkedResult{ok: true, back: true, detail: "not exported"}
	}
	var base, peak ParkedPoint
	for _, p := range pts {
		if p.At < start && p.At >= start-lookback {
			base.Stores, base.Blocks = max(base.Stores, p.Stores), max(base.Blocks, p.Blocks)
		}
	}
	head := func() string {
		return fmt.Sprintf("baseline %s stores (%s blocks), peak %s (%s)", num(base.Stores), num(base.Blocks), num(peak.Stores), num(peak.Blocks))
	}
	deadline := from + bound
	var last ParkedPoint
	for _, p := range pts {
		if p.At < start {
			continue
		}
		if p.Stores > peak.Stores {
			peak = p
		}
		if p.At < from {
			continue
		}
		last = p
		if p.Stores <= base.Stores && p.Blocks <= base.Blocks {
			back := p.At - from
			if p.At > deadline {
				return parkedResult{back: true, detail: fmt.Sprintf("%s, back only after %.1fs", head(), back.Seconds())}
			}
			return parkedResult{ok: true, back: true, detail: fmt.Sprintf("%s, back after %.1fs", head(), back.Seconds())}
		}
	}
	if runEnd < deadline {
		// The run ended before the bound: nothing to judge by.
		return parkedResult{empty: true, detail: fmt.Sprintf("%s, still %s parked when the run ended at %.1fs, before the bound (a longer --recovery judges it)",
			head(), num(last.Stores), runEnd.Seconds())}
	}
	return parkedResult{detail: fmt.Sprintf("%s, still %s stores (%s blocks) parked %.1fs after", head(), num(last.Stores), num(last.Blocks), (last.At - from).Seconds())}
}

func num(v float64) string { return fmt.Sprintf("%g", v) }
