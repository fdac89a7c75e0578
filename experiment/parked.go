package experiment

import (
	"slices"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// The parked check (check.ParkedWindow) reads each source's parked stores
// once a second over the run. Kept for the whole run they grow with it (72
// engines: 43 200 readings in 10 minutes, read again by every verdict), so
// only those a decoder window may still judge are kept, as the decoder
// checks' samples are (decsamples.go): a window whose sources' stores were
// all back is judged once and for good, and a reading from before the
// lookback of every window not settled yet (or of a window opening now)
// can serve none of them. The readings are pruned, and the windows that
// can settle settled, once per lookback of run time. Each engine's last
// reading is kept, so that a source that stopped exporting still reads as
// exported.

// noteParked keeps engine's parked stores read at at, when it exports them.
func (v *verdicts) noteParked(engine string, at time.Duration, r event.Reading) {
	if !r.ParkedStores.OK {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.parked == nil {
		v.parked = map[string][]check.ParkedPoint{}
	}
	v.parked[engine] = append(v.parked[engine], check.ParkedPoint{At: at, Stores: r.ParkedStores.V, Blocks: r.PinnedBlocks.V})
	if at-v.parkedPrunedAt >= v.lookback {
		v.parkedPrunedAt = at
		v.pruneParked(at)
	}
}

// parkedSetup sets the parked check (check.NameParkedStores) up: it
// judges the sources' parked stores after each decoder fault, back within
// the engines' unbound_store_timeout_s and check.ParkedMargin, at the
// run's time scale; the baseline is read over the recovery window's length
// before the fault.
func (e *Experiment) parkedSetup() {
	timeout := e.plan.UnboundStoreTimeout
	if timeout <= 0 {
		timeout = DefaultUnboundStoreTimeout
	}
	v := e.verdicts
	v.parkedSources = make([]string, e.plan.Sources)
	for i := range v.parkedSources {
		v.parkedSources[i] = event.SourceName(i)
	}
	v.parkedBound = e.cfg.scale(timeout + check.ParkedMargin(timeout))
	v.lookback = e.cfg.Bounds.Scaled(e.cfg.TimeScale).RecoveryWindow
}

// parkedChecks are check.ParkedWindow of the decoder windows so far,
// judged to runEnd.
func (v *verdicts) parkedChecks(runEnd time.Duration) []event.Result {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.judgeParked(runEnd)
}

// judgeParked judges each decoder window not settled yet, keeping those
// that settle: judged once, for good.
func (v *verdicts) judgeParked(runEnd time.Duration) []event.Result {
	var out []event.Result
	for i, w := range v.decWindows {
		if r, ok := v.parkedSettled[i]; ok {
			out = append(out, r)
			continue
		}
		r, ok, settled := check.ParkedWindow(v.parkedSources, v.parked, w, v.parkedBound, v.lookback, runEnd)
		if !ok {
			continue
		}
		out = append(out, r)
		if settled {
			if v.parkedSettled == nil {
				v.parkedSettled = map[int]event.Result{}
			}
			v.parkedSettled[i] = r
		}
	}
	return out
}

// pruneParked lets go of the readings from before now's lookback and
// before that of every decoder window not settled yet, but each engine's
// last. A window opening now may be dated a little before now (its fault
// acted first: an attach command can take seconds), so a window opening
// now keeps twice the lookback.
func (v *verdicts) pruneParked(now time.Duration) {
	v.judgeParked(now)
	from := now - 2*v.lookback
	for i, w := range v.decWindows {
		if _, ok := v.parkedSettled[i]; !ok {
			from = min(from, w.Start-v.lookback)
		}
	}
	for name, pts := range v.parked {
		last := pts[len(pts)-1]
		pts = slices.DeleteFunc(pts, func(p check.ParkedPoint) bool { return p.At < from })
		if len(pts) == 0 {
			pts = append(pts, last)
		}
		v.parked[name] = pts
	}
}

// keptParked is how many parked readings the check holds (a test's).
func (v *verdicts) keptParked() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, pts := range v.parked {
		n += len(pts)
	}
	return n
}
