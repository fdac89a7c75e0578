package report

import (
	"fmt"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"p2pfault/event"
)

// SeedInterval is the seed's rate: one trial per source every 0.5 s. Counts
// of the seed's table scale with the run's rate.
const SeedInterval = 500 * time.Millisecond

// SeedRow is one row of the seed's table (vLLM's FAULTS=1 slice on
// Llama-3.2-1B, as published in its pull request: docs/seed.md), in real
// seconds.
type SeedRow struct {
	Arm, Case   string
	Passed      bool
	FaultedN    int // 0: the seed does not give it (fixed stall, both kills' 58 are given)
	FaultedP50  float64
	FaultedMax  float64
	HealthyN    int
	HealthyHit  int
	HealthyMax  float64
	RecoveryN   int // 0: no recovery column (remove)
	RecoveryHit int
}

// SeedTable is the seed's table. Its arm "+ #64501" is p2pfault's "fixed".
// Only main stall's n (54) is printed by the seed apart from the table's
// n ≈ 55–60; the kill and remove rows' n are their healthy columns' (58, 61),
// as the pulls naming each source come at one rate.
var SeedTable = []SeedRow{
	{"main", "stall", false, 54, 16.85, 30.04, 60, 60, 0.07, 51, 43},
	{"main", "kill", true, 58, 0.01, 0.05, 58, 58, 0.06, 51, 51},
	{"main", "remove", true, 61, 0.01, 0.02, 61, 61, 0.03, 0, 0},
	{"fixed", "stall", true, 0, 0.01, 7.08, 60, 60, 0.06, 51, 41},
	{"fixed", "kill", true, 58, 0.01, 0.04, 58, 58, 0.06, 51, 51},
	{"fixed", "remove", true, 61, 0.01, 0.02, 61, 61, 0.04, 0, 0},
}

// Range is a tolerance [Lo, Hi]; NaN leaves a side open.
type Range struct{ Lo, Hi float64 }

func (r Range) has(v float64) bool {
	return (math.IsNaN(r.Lo) || v >= r.Lo) && (math.IsNaN(r.Hi) || v <= r.Hi)
}

func (r Range) format(unit string, prec int) string {
	f := func(v float64) string { return fmt.Sprintf("%.*f", prec, v) }
	switch {
	case math.IsNaN(r.Lo):
		return "≤ " + f(r.Hi) + unit
	case math.IsNaN(r.Hi):
		return "≥ " + f(r.Lo) + unit
	}
	return f(r.Lo) + "–" + f(r.Hi) + unit
}

var open = math.NaN()

// Cell kinds, and whether the figure follows the time scale: timeout-driven
// waits do (the sim scales its timeouts), compute-driven latencies and hit
// fractions do not; counts follow the rate.
type cellKind int

const (
	kindVerdict cellKind = iota
	kindCount            // scales with the rate
	kindTimeout          // seconds that scale with --time-scale
	kindCompute          // seconds that do not scale
	kindFraction
)

// Target is one cell of issue 8's targets table: the tolerance a simulated
// run must meet, in the seed's units (real seconds, 2 trials/s).
type Target struct {
	Arm, Case, Cell string
	kind            cellKind
	Tol             Range
}

// SeedTargets are issue 8's tolerances, cell by cell.
var SeedTargets = []Target{
	{"main", "stall", "faulted p50", kindTimeout, Range{14.3, 19.4}},
	{"main", "stall", "faulted max", kindTimeout, Range{29, 31}},
	{"main", "stall", "recovery", kindFraction, Range{0.75, 0.95}},
	{"fixed", "stall", "faulted p50", kindCompute, Range{open, 0.1}},
	{"fixed", "stall", "faulted max", kindTimeout, Range{6, 8}},
	{"fixed", "stall", "recovery", kindFraction, Range{0.75, 0.95}},
	{"*", "kill", "faulted n", kindCount, Range{52, 64}},
	{"*", "kill", "faulted p50", kindCompute, Range{open, 0.1}},
	{"*", "kill", "faulted max", kindCompute, Range{open, 0.5}},
	{"*", "kill", "recovery", kindFraction, Range{0.95, open}},
	{"*", "remove", "faulted n", kindCount, Range{55, 67}},
	{"*", "remove", "faulted p50", kindCompute, Range{open, 0.1}},
	{"*", "remove", "faulted max", kindCompute, Range{open, 0.5}},
	{"*", "*", "healthy pulled", kindFraction, Range{1, open}},
	{"*", "*", "healthy max", kindCompute, Range{open, 0.5}},
}

// Comparison is one cell of a run beside the seed's.
type Comparison struct {
	Arm, Case, Cell string
	Seed, Sim       string  // as printed
	Diff            string  // sim − seed, in the seed's units
	Target          string  // the tolerance, "" when the issue sets none
	Value           float64 // the sim's figure in the seed's units (fractions 0–1)
	Outside         bool    // the cell misses its tolerance (or the verdict differs)
}

// SeedScale says how a run's figures map onto the seed's: its time scale
// and its interval between trials of one source.
type SeedScale struct {
	TimeScale float64
	Interval  time.Duration
}

func (s SeedScale) rate() float64 {
	if s.Interval <= 0 {
		return 1
	}
	return float64(SeedInterval) / float64(s.Interval)
}

// CompareSeed sets each row's cells beside the seed's table. Timeout-driven
// seconds are divided by the time scale and counts by the rate (relative to
// the seed's 2 trials/s), so every figure is in the seed's units.
func CompareSeed(rows []Row, sc SeedScale) []Comparison {
	sc.TimeScale = event.TimeScaleOf(sc.TimeScale)
	var out []Comparison
	for _, r := range rows {
		s, ok := seedRow(r.Arm, r.Case)
		if !ok || event.ModeOf(r.Mode) != event.ModeP2P {
			continue // the seed's table is of p2p mode only
		}
		verdict := func(p bool) string {
			if p {
				return "pass"
			}
			return "FAIL"
		}
		sim := verdict(r.Passed)
		if r.Result == ResultInterrupted {
			sim = resultWord(r.Result) // cut short: no verdict to set beside the seed's
		}
		out = append(out, Comparison{Arm: r.Arm, Case: r.Case, Cell: "result", Seed: verdict(s.Passed), Sim: sim,
			Diff: map[bool]string{true: "=", false: "differs"}[verdict(s.Passed) == sim], Target: verdict(s.Passed), Outside: verdict(s.Passed) != sim})
		secs := func(cell string, seed, sim float64) {
			// Only waits the targets call timeout-driven follow the time
			// scale; a local prefill takes as long at any scale.
			if t, ok := TargetFor(r.Arm, r.Case, cell); ok && t.kind == kindTimeout {
				sim /= sc.TimeScale
			}
			c := Comparison{Arm: r.Arm, Case: r.Case, Cell: cell, Seed: fmt.Sprintf("%.2f s", seed), Sim: fmt.Sprintf("%.2f s", sim),
				Diff: fmt.Sprintf("%+.2f s", sim-seed), Value: sim}
			out = append(out, judge(c))
		}
		count := func(cell string, seed, simN, simHit int) {
			if seed == 0 && simN == 0 {
				return
			}
			n := float64(simN) / sc.rate()
			c := Comparison{Arm: r.Arm, Case: r.Case, Cell: cell, Value: n}
			if seed > 0 {
				c.Seed = fmt.Sprint(seed)
				c.Diff = fmt.Sprintf("%+.0f", n-float64(seed))
			} else {
				c.Seed, c.Diff = "–", ""
			}
			c.Sim = fmt.Sprint(simN)
			if sc.rate() != 1 {
				c.Sim += fmt.Sprintf(" (%.0f at 2/s)", n)
			}
			out = append(out, judge(c))
		}
		frac := func(cell string, seedN, seedHit, simN, simHit int) {
			if seedN == 0 && simN == 0 {
				return
			}
			f := 0.0
			if simN > 0 {
				f = float64(simHit) / float64(simN)
			}
			c := Comparison{Arm: r.Arm, Case: r.Case, Cell: cell, Sim: fmt.Sprintf("%d/%d (%.0f %%)", simHit, simN, 100*f), Value: f}
			if seedN > 0 {
				sf := float64(seedHit) / float64(seedN)
				c.Seed = fmt.Sprintf("%d/%d (%.0f %%)", seedHit, seedN, 100*sf)
				c.Diff = fmt.Sprintf("%+.0f pp", 100*(f-sf))
			} else {
				c.Seed = "–"
			}
			out = append(out, judge(c))
		}
		count("faulted n", s.FaultedN, r.Faulted.N, r.Faulted.Pulled)
		secs("faulted p50", s.FaultedP50, r.Faulted.P50)
		secs("faulted max", s.FaultedMax, r.Faulted.Max)
		frac("healthy pulled", s.HealthyN, s.HealthyHit, r.Healthy.N, r.Healthy.Pulled)
		secs("healthy max", s.HealthyMax, r.Healthy.Max)
		if r.Recovery != nil {
			frac("recovery", s.RecoveryN, s.RecoveryHit, r.Recovery.N, r.Recovery.Pulled)
		}
	}
	return out
}

func seedRow(arm, c string) (SeedRow, bool) {
	for _, s := range SeedTable {
		if s.Arm == arm && s.Case == c {
			return s, true
		}
	}
	return SeedRow{}, false
}

// TargetFor is issue 8's tolerance of one cell, if it sets one.
func TargetFor(arm, c, cell string) (Target, bool) {
	for _, t := range SeedTargets {
		if (t.Arm == "*" || t.Arm == arm) && (t.Case == "*" || t.Case == c) && t.Cell == cell {
			return t, true
		}
	}
	return Target{}, false
}

func judge(c Comparison) Comparison {
	t, ok := TargetFor(c.Arm, c.Case, c.Cell)
	if !ok {
		return c
	}
	switch t.kind {
	case kindFraction:
		lo, hi := t.Tol.Lo*100, t.Tol.Hi*100
		c.Target = Range{lo, hi}.format(" %", 0)
	case kindCount:
		c.Target = t.Tol.format("", 0)
	default:
		c.Target = t.Tol.format(" s", 1)
		if t.Tol.Hi < 1 {
			c.Target = t.Tol.format(" s", 2)
		}
	}
	c.Outside = !t.Tol.has(c.Value)
	return c
}

// CompareSeedTable renders the comparison: one line per cell, the seed's
// figure, the run's (in the seed's units), their difference, the tolerance,
// and "OUTSIDE" where the run misses it.
func CompareSeedTable(cs []Comparison, sc SeedScale) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The seed's table beside this run (time scale %g: timeout-driven seconds ÷ %g; counts at the seed's 2 trials/s)\n", sc.TimeScale, sc.TimeScale)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tcell\tseed\tsim\tdiff\ttarget\t")
	outside := 0
	for _, c := range cs {
		mark := ""
		if c.Outside {
			mark = "OUTSIDE"
			outside++
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Arm, c.Case, c.Cell, c.Seed, c.Sim, c.Diff, c.Target, mark)
	}
	tw.Flush()
	fmt.Fprintf(&b, "compare-seed: %d of %d cells outside their tolerance\n", outside, len(cs))
	return b.String()
}

// Contains reports whether v is in the range.
func (r Range) Contains(v float64) bool { return r.has(v) }

// Widen returns the range with d added on each closed side.
func (r Range) Widen(d float64) Range { return Range{r.Lo - d, r.Hi + d} }

// Slack picks the slack of the target's kind: a timeout-driven wait, a
// compute-driven latency, a count or a fraction.
func (t Target) Slack(timeout, compute, count, fraction float64) float64 {
	switch t.kind {
	case kindFraction:
		return fraction
	case kindTimeout:
		return timeout
	case kindCompute:
		return compute
	case kindCount:
		return count
	}
	return 0
}
