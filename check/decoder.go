package check

import (
	"fmt"
	"time"

	"p2pfault/event"
)

// The checks of a fault on a decoder (issue #41), beside the seed's five,
// which judge a fault on a source.
const (
	// NameHealthyDecoders: while decoder d is down, the pulls through
	// every other decoder (to every source) keep hitting within the
	// healthy bounds: one decoder's fault costs the others nothing.
	NameHealthyDecoders = "healthy_decoders_keep_hitting"
	// NameDecoderRecovers: once the fault on decoder d is over, the pulls
	// through it hit again within the recovery window (a restarted decoder
	// reconnects to its sources rather than stalling on a stale endpoint,
	// vllm #49238).
	NameDecoderRecovers = "faulted_decoder_hits_again"
)

// IsDecoderCheck says whether name is one of the checks of a decoder's
// fault, which the console prints with the final verdict, passed or not.
func IsDecoderCheck(name string) bool {
	return name == NameHealthyDecoders || name == NameDecoderRecovers || name == NameParkedStores
}

// DecoderWindow is a fault window on decoder Decoder (the experiment's
// bookkeeping of a decoder's fault, or a pair's); End is 0 while it is open and for a
// fault that lasts the run (remove).
type DecoderWindow struct {
	Decoder int
	// Pair: the fault cut the link between decoder Decoder and source
	// Source alone (`partition source-0 from decoder-1`), not the whole
	// decoder.
	Pair       bool
	Source     int
	Recovers   bool // it will close (not remove, which lasts the run)
	Kind       string
	Start, End time.Duration
}

// DecoderChecks judges every decoder window ws over the run's samples
// (ended by runEnd) with bounds b: per window, NameHealthyDecoders when
// the run has other decoders (decoders > 1) and, when it closed,
// NameDecoderRecovers.
func DecoderChecks(samples []event.Sample, ws []DecoderWindow, b event.Bounds, decoders int, runEnd time.Duration) []event.Result {
	var out []event.Result
	for _, w := range ws {
		end := w.End
		if end == 0 {
			end = runEnd
		}
		what := fmt.Sprintf("%s %s at %.1fs", w.Kind, w.target(), w.Start.Seconds())
		if decoders > 1 || w.Pair {
			healthy := pullsWhere(samples, func(s event.Sample) bool {
				return !w.faulted(s) && s.Start >= w.Start && s.Start < end
			})
			out = append(out, laggedOut(rateResult(NameHealthyDecoders, what, w.others(), healthy, b.HealthyHitRate, b.HealthyMax), healthy))
		}
		if w.End == 0 {
			continue
		}
		back := pullsWhere(samples, func(s event.Sample) bool {
			return w.faulted(s) && s.Start >= w.End && s.Start < w.End+b.RecoveryWindow
		})
		out = append(out, laggedOut(rateResult(NameDecoderRecovers, what, "through "+w.target()+" after it", back, b.RecoveryHitRate, 0), back))
	}
	return out
}

// target is what w's fault acted on: "decoder-1", "source-0 from decoder-1".
func (w DecoderWindow) target() string {
	d := fmt.Sprintf("decoder-%d", w.Decoder)
	if !w.Pair {
		return d
	}
	return event.SourceName(w.Source) + " from " + d
}

// faulted says whether pull s went through what w's fault acted on.
func (w DecoderWindow) faulted(s event.Sample) bool {
	return s.Decoder == w.Decoder && (!w.Pair || s.Source == w.Source)
}

// others says which pulls the healthy check of w takes.
func (w DecoderWindow) others() string {
	if !w.Pair {
		return "through the other decoders"
	}
	return "of every other pair"
}

func pullsWhere(samples []event.Sample, keep func(event.Sample) bool) []event.Sample {
	var out []event.Sample
	for _, s := range samples {
		if keep(s) {
			out = append(out, s)
		}
	}
	return out
}

// rateResult is check name over pulls: at least rate of them hit and
// (maxLat > 0) none took longer than maxLat. No pull at all fails: the
// check could not see what it is for.
func rateResult(name, what, through string, pulls []event.Sample, rate float64, maxLat time.Duration) event.Result {
	r := event.Result{Name: name}
	if len(pulls) == 0 {
		r.Empty = true
		r.Detail = fmt.Sprintf("%s: empty window: no pull %s", what, through)
		return r
	}
	hits, slowest := 0, time.Duration(0)
	for _, s := range pulls {
		if s.Hit() {
			hits++
		}
		slowest = max(slowest, s.Latency)
	}
	got := float64(hits) / float64(len(pulls))
	r.Passed = got >= rate && (maxLat == 0 || slowest <= maxLat)
	r.Detail = fmt.Sprintf("%s: %d of %d pulls %s hit (%.0f%%, bound %.0f%%), max %.2fs",
		what, hits, len(pulls), through, 100*got, 100*rate, slowest.Seconds())
	if maxLat > 0 {
		r.Detail += fmt.Sprintf(" (bound %.2fs)", maxLat.Seconds())
	}
	return r
}
