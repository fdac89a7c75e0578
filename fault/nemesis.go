package fault

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"p2pfault/event"
)

// NemesisRandom is the nemesis that draws its faults at random from a
// seed (Jepsen's name for the part of a test that breaks things).
const NemesisRandom = "random"

// CaseNemesis is the case of a run whose faults a nemesis drew: its rows
// read ARM/nemesis.
const CaseNemesis = "nemesis"

// Draw is one kind a nemesis draws from, with the word it takes when it
// takes one (loss's share): "stall", "loss=30%".
type Draw struct {
	Kind *Kind
	Arg  string
}

func (d Draw) String() string {
	if d.Arg != "" {
		return d.Kind.Name + "=" + d.Arg
	}
	return d.Kind.Name
}

// Repeatable reports whether a nemesis can fire k again and again: it
// acts on a source that is up, opens a fault window and closes it by
// itself, after its "for" (stall, partition, loss) or once the source is
// back (kill's restart). A kind that leaves its source down (remove) or
// only undoes another (resume, restore, heal) cannot.
func (k *Kind) Repeatable() bool {
	if !k.Opens || k.needs() != event.CondUp {
		return false
	}
	return k.Ending == EndsAfterFor && k.TakesFor || k.Ending == EndsWithRecovery
}

// RepeatableNames lists the kinds a nemesis can draw, for messages.
func RepeatableNames() string {
	var out []string
	for _, k := range Kinds() {
		if k.Repeatable() {
			out = append(out, k.Name)
		}
	}
	return strings.Join(out, ", ")
}

// DefaultDraws are the kinds a nemesis draws from when none are given:
// every kind that is a fault case (`run --case`) and can fire repeatedly,
// in the registry's order, read from the registry so a new case kind is
// drawn too. With the seed's kinds, replace and partition: stall, kill,
// replace, partition (remove is the seed's third case, but it leaves its
// source down). A
// kind that takes an argument is never a default: its word must be given.
func DefaultDraws() []Draw {
	var out []Draw
	for _, k := range Kinds() {
		// A link kind is drawn only when named: drawing it would make
		// every default nemesis relay its pairs.
		if k.Case != NoCase && k.Repeatable() && k.Arg == nil && !k.Link {
			out = append(out, Draw{Kind: k})
		}
	}
	return out
}

// ParseDraw reads one kind a nemesis draws from, "NAME" or "NAME=ARG":
// a registered, repeatable kind, with its word when it takes one.
func ParseDraw(s string) (Draw, error) {
	name, arg, hasArg := strings.Cut(s, "=")
	k, ok := Lookup(name)
	if !ok {
		return Draw{}, fmt.Errorf("unknown fault kind %q (a nemesis draws from %s)", name, RepeatableNames())
	}
	if !k.Repeatable() {
		return Draw{}, fmt.Errorf("%s cannot fire repeatedly (%s); a nemesis draws from %s", name, whyNotRepeatable(k), RepeatableNames())
	}
	switch {
	case k.Arg != nil && !hasArg && !k.Arg.Optional:
		return Draw{}, fmt.Errorf("%s takes %s: write %s=ARG, e.g. %s=30%%", name, k.Arg.Name, name, name)
	case k.Arg == nil && hasArg:
		return Draw{}, fmt.Errorf("%s takes no argument, got %q", name, arg)
	case k.Arg != nil && hasArg:
		if err := k.Arg.Check(arg); err != nil {
			return Draw{}, fmt.Errorf("%s %q: %w", name, arg, err)
		}
	}
	return Draw{Kind: k, Arg: arg}, nil
}

func whyNotRepeatable(k *Kind) string {
	switch {
	case k.needs() != event.CondUp:
		return fmt.Sprintf("it acts only on a source that is %s", k.needs())
	case k.Ending == StaysDown:
		return "it leaves its source down"
	default:
		return "it opens no fault window that closes by itself"
	}
}

// Nemesis draws a schedule of faults from a seed: the same seed and
// settings give the same schedule, step for step. Durations are at the
// seed's time (before --time-scale), as a timeline's are. Zero values are
// taken as noted; the values are checked where they are read (package
// cli), not here.
type Nemesis struct {
	Seed  int64
	Kinds []Draw // nil: DefaultDraws
	// Gap is the mean time from a fault's planned end to the next fault's
	// start (in the same lane, see AtOnce), drawn uniformly from
	// [Gap-GapSpread, Gap+GapSpread].
	Gap, GapSpread time.Duration
	// Length is the mean length of a fault that takes "for", drawn the
	// same way.
	Length, LengthSpread time.Duration
	// Settle is how long a kind that closes its window without "for" (a
	// kill: until the restarted source is ready) is planned to keep it
	// open: the restart's length. The experiment still waits for the
	// window to close before the next fault when AtOnce allows no more.
	Settle  time.Duration
	Sources []int // the sources faulted; nil: every source
	// Grains are what of a source a fault drawn for it acts on, by source
	// (--nemesis-sources 0/1: rank 1 of source-0): one of them, drawn
	// when there are several; a source without any: its whole engine.
	Grains map[int][]Grain
	// AtOnce is how many faults may be in force at once (each on its own
	// source); 0 is 1.
	AtOnce int
	// Decoders is how many decoders the cluster has. With several, and
	// Sources nil (every target), each decoder is drawn as a source is,
	// for the kinds that keep their target's address (not NewAddress):
	// deployments lose decoders too (issue #41). With one, the
	// schedule is the one it was before decoders were drawn.
	Decoders int
}

// decoderKeys are the decoders a schedule may fault, each as the key
// -1-d (a source's is its index), so one list and one clash test hold
// both; none unless the run has several and every target is drawn.
func (n Nemesis) decoderKeys() []int {
	if n.Decoders < 2 || len(n.Sources) > 0 {
		return nil
	}
	keys := make([]int, n.Decoders)
	for d := range keys {
		keys[d] = -1 - d
	}
	return keys
}

// scheduleStep is the resolution of every drawn time: schedules read as
// "at 1m12.3s stall source-1 for 17.4s".
const scheduleStep = 100 * time.Millisecond

// Schedule draws the faults of a run whose first fault may fire at from
// and which ends at until: each fault's planned end plus recovery (the
// recovery window the checks judge after it) lies at or before until.
// sources is the cluster's count, for Sources' default. The timeline is
// in time order; it is empty when no fault fits.
func (n Nemesis) Schedule(from, until, recovery time.Duration, sources int) Timeline {
	kinds := n.Kinds
	if len(kinds) == 0 {
		kinds = DefaultDraws()
	}
	srcs := n.Sources
	if len(srcs) == 0 {
		for i := range sources {
			srcs = append(srcs, i)
		}
	}
	decs := n.decoderKeys()
	atOnce := max(n.AtOnce, 1)
	if len(kinds) == 0 || len(srcs) == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(uint64(n.Seed), 0x9e3779b97f4a7c15))
	var busy []planned
	// Each lane is a sequence of faults, one after another with a gap
	// between; lanes start staggered over one mean cycle.
	lanes := make([]time.Duration, atOnce)
	for i := range lanes {
		lanes[i] = from + time.Duration(i)*((n.Length+n.Gap)/time.Duration(atOnce)).Round(scheduleStep)
	}
	var tl Timeline
	for len(lanes) > 0 {
		li := 0
		for i, t := range lanes {
			if t < lanes[li] {
				li = i
			}
		}
		t := lanes[li]
		d := kinds[uniformN(r, len(kinds))]
		k := d.Kind
		length := uniform(r, n.Length, n.LengthSpread, scheduleStep)
		down := length
		if !k.TakesFor {
			down = cmp.Or(n.Settle, n.Length)
		}
		pool := srcs
		if !k.NewAddress && len(decs) > 0 {
			pool = slices.Concat(srcs, decs)
		}
		var free []int
		free, t = freeSources(busy, pool, t, down)
		if t+down+recovery > until || len(free) == 0 {
			lanes = slices.Delete(lanes, li, li+1)
			continue
		}
		src := free[uniformN(r, len(free))]
		s := Step{At: t, Action: Action{Kind: k, Source: src, Options: Options{Arg: d.Arg}}}
		if src < 0 {
			s.Source, s.Grain = -1-src, Grain{Decoder: true}
		} else {
			s.Grain = n.grain(r, src)
		}
		if k.TakesFor {
			s.For = length
		}
		tl = append(tl, s)
		busy = append(busy, planned{source: src, start: t, end: t + down})
		lanes[li] = t + down + uniform(r, n.Gap, n.GapSpread, scheduleStep)
	}
	slices.SortStableFunc(tl, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
	return tl
}

// grain is what of src a fault acts on: its only grain, or one drawn of
// several (a draw only then, so a schedule of whole sources is the one it
// was before grains).
func (n Nemesis) grain(r *rand.Rand, src int) Grain {
	gs := n.Grains[src]
	switch len(gs) {
	case 0:
		return Grain{}
	case 1:
		return gs[0]
	}
	return gs[uniformN(r, len(gs))]
}

// planned is a fault a schedule holds: its source (or decoder, as its
// key -1-d) is taken over [start, end).
type planned struct {
	source     int
	start, end time.Duration
}

// freeSources are the sources of srcs no fault in busy takes over
// [t, t+down), and the instant they are free: when every one is taken,
// the fault waits for the first to end (none free and t as given when no
// fault would ever end).
func freeSources(busy []planned, srcs []int, t, down time.Duration) ([]int, time.Duration) {
	var free []int
	for {
		free = free[:0]
		next := time.Duration(-1)
		for _, s := range srcs {
			clash := false
			for _, b := range busy {
				if b.source == s && b.start < t+down && t < b.end {
					clash = true
					if next < 0 || b.end < next {
						next = b.end
					}
				}
			}
			if !clash {
				free = append(free, s)
			}
		}
		if len(free) > 0 || next < 0 {
			return free, t
		}
		t = next
	}
}

// uniformN is a number in [0, n) from r's next output. It reads r's raw
// output, not a helper of math/rand whose mapping could change between Go
// releases, so a seed's schedule stays the same.
func uniformN(r *rand.Rand, n int) int { return int(r.Uint64() % uint64(n)) }

// uniform is a duration in [mean-spread, mean+spread] in steps of step,
// never below one step.
func uniform(r *rand.Rand, mean, spread, step time.Duration) time.Duration {
	lo, hi := (mean - spread).Round(step), (mean + spread).Round(step)
	lo = max(lo, step)
	if hi <= lo {
		return lo
	}
	return lo + step*time.Duration(r.Uint64()%uint64((hi-lo)/step+1))
}
