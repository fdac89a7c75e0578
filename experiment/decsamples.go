package experiment

import (
	"cmp"
	"slices"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/probe"
)

// The decoder checks judge their windows over the run's samples
// (check.DecoderChecks), kept while the run has several decoders, since a
// key or the nemesis may fault a decoder at any time. Kept for the whole
// run they grow with it (16 sources, 2 decoders: 19 200 samples in 10
// minutes, and the checks read all of them every second), so only those a
// decoder window may still judge are kept: a window whose recovery
// ended before every pull sent then has ended is judged once and for good,
// and a sample that started before every window still open (or before
// that instant, when none is) can serve none of them, nor a later window,
// which opens after it started.

// pullsEndWithin is how long after it is sent a pull has surely ended:
// its timeout, and a few seconds for its sample to reach the judge.
func (e *Experiment) pullsEndWithin() time.Duration {
	return e.cfg.scale(cmp.Or(e.cfg.PullTimeout, probe.DefaultPullTimeout)) + 5*time.Second
}

// decoderChecks are the checks of the decoder windows so far, judged to
// runEnd with bounds b (check.DecoderChecks). Every pull sent before
// ended (since t0) has ended: a window whose recovery window closed by
// then is settled, and the samples no window needs any more are let go.
func (v *verdicts) decoderChecks(b event.Bounds, decoders int, runEnd, ended time.Duration) []event.Result {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []event.Result
	for i, w := range v.decWindows {
		if r, ok := v.decSettled[i]; ok {
			out = append(out, r...)
			continue
		}
		r := check.DecoderChecks(v.samples, []check.DecoderWindow{w}, b, decoders, runEnd)
		out = append(out, r...)
		if w.End != 0 && w.End+b.RecoveryWindow <= ended {
			if v.decSettled == nil {
				v.decSettled = map[int][]event.Result{}
			}
			v.decSettled[i] = r
		}
	}
	v.prune(ended)
	return out
}

// pruneEvery is how many samples are kept between prunes that ended
// (verdicts.ended) does itself: a run judged only at its end (headless,
// no window) still lets its samples go.
const pruneEvery = 1024

// prune lets go of the samples that started before ended (every pull sent
// before it has ended) and before every decoder window not settled yet.
func (v *verdicts) prune(ended time.Duration) {
	from := ended
	for i, w := range v.decWindows {
		if _, ok := v.decSettled[i]; !ok {
			from = min(from, w.Start)
		}
	}
	if from > v.keepFrom {
		v.keepFrom = from
		v.samples = slices.DeleteFunc(v.samples, func(s event.Sample) bool { return s.Start < from })
	}
}

// keptSamples is how many samples the decoder checks hold (a test's).
func (v *verdicts) keptSamples() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.samples)
}
