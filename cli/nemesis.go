package cli

import (
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/report"
)

// Defaults of a nemesis, at the seed's time (--time-scale multiplies
// them): faults as long as the seed's stall on average, and gaps whose
// shortest is the seed's 25 s recovery window, so each fault's recovery
// is judged before the next one fires.
const (
	defaultNemesisGap          = 40 * time.Second
	defaultNemesisGapSpread    = 15 * time.Second
	defaultNemesisLength       = 30 * time.Second
	defaultNemesisLengthSpread = 15 * time.Second
)

// nemesisFlags are run's --nemesis flags.
type nemesisFlags struct {
	name         string
	seed         int64
	kinds        []string
	gap          time.Duration
	gapSpread    time.Duration
	length       time.Duration
	lengthSpread time.Duration
	sources      []string
	atOnce       int
}

// nemesisFlagNames are the flags that need --nemesis.
var nemesisFlagNames = []string{"nemesis-seed", "nemesis-kinds", "nemesis-gap", "nemesis-gap-spread",
	"nemesis-length", "nemesis-length-spread", "nemesis-sources", "nemesis-at-once"}

func (f *nemesisFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "nemesis", "", "draw the run's faults at random instead of a case: "+fault.NemesisRandom+" (needs --duration; see --nemesis-seed)")
	fs.Int64Var(&f.seed, "nemesis-seed", 0, "the nemesis' seed: the same seed and flags draw the same schedule (default: drawn from the clock, printed)")
	fs.StringSliceVar(&f.kinds, "nemesis-kinds", nil, "fault kinds to draw from, NAME or NAME=ARG (loss=30%); any kind that can fire repeatedly (default: every case kind that can: "+drawList(fault.DefaultDraws())+")")
	fs.DurationVar(&f.gap, "nemesis-gap", defaultNemesisGap, "mean time from a fault's end to the next fault")
	fs.DurationVar(&f.gapSpread, "nemesis-gap-spread", defaultNemesisGapSpread, "the gap is drawn uniformly within this of its mean")
	fs.DurationVar(&f.length, "nemesis-length", defaultNemesisLength, "mean length of a fault that takes \"for\" ("+fault.TakesForList()+"); a kill lasts its restart (--restart-length)")
	fs.DurationVar(&f.lengthSpread, "nemesis-length-spread", defaultNemesisLengthSpread, "the length is drawn uniformly within this of its mean")
	fs.StringSliceVar(&f.sources, "nemesis-sources", nil, "what to fault: source indexes, e.g. 0,1, or one data-parallel rank of a source, N/R (0/1: source-0's rank 1; --source-dp) (default every source, whole)")
	fs.IntVar(&f.atOnce, "nemesis-at-once", 1, "how many faults may be in force at once, each on its own source")
}

// build checks the nemesis flags (each once, here) and returns the
// nemesis they describe, nil without --nemesis. restart is how long a
// killed source takes to come back: the length a kill is planned with;
// duration is the run's (--duration), which a nemesis needs.
func (f *nemesisFlags) build(fs *pflag.FlagSet, restart, duration time.Duration) (*fault.Nemesis, error) {
	if !fs.Changed("nemesis") {
		for _, name := range nemesisFlagNames {
			if fs.Changed(name) {
				return nil, exitcode.Usagef("--%s needs --nemesis %s", name, fault.NemesisRandom)
			}
		}
		return nil, nil
	}
	if f.name != fault.NemesisRandom {
		return nil, exitcode.Usagef("--nemesis %q: want %s", f.name, fault.NemesisRandom)
	}
	for _, other := range []string{"case", "timeline"} {
		if fs.Changed(other) {
			return nil, exitcode.Usagef("--nemesis draws the run's faults: it takes no --%s", other)
		}
	}
	if duration <= 0 {
		return nil, exitcode.Usagef("--nemesis %s needs --duration: how long the soak runs", f.name)
	}
	n := &fault.Nemesis{
		Seed: f.seed, Gap: f.gap, GapSpread: f.gapSpread, Length: f.length, LengthSpread: f.lengthSpread,
		Settle: restart, AtOnce: f.atOnce,
	}
	if !fs.Changed("nemesis-seed") {
		n.Seed = time.Now().UnixNano()
	}
	if fs.Changed("nemesis-kinds") && len(f.kinds) == 0 {
		return nil, exitcode.Usagef("--nemesis-kinds: give at least one kind (%s)", fault.RepeatableNames())
	}
	for _, k := range f.kinds {
		d, err := fault.ParseDraw(strings.TrimSpace(k))
		if err != nil {
			return nil, exitcode.Usagef("--nemesis-kinds %s: %w", k, err)
		}
		if slices.Contains(n.Kinds, d) {
			return nil, exitcode.Usagef("--nemesis-kinds %s: given twice", k)
		}
		n.Kinds = append(n.Kinds, d)
	}
	switch {
	case f.gap < 0:
		return nil, exitcode.Usagef("--nemesis-gap %v: want a duration of 0 or more", f.gap)
	case f.gapSpread < 0 || f.gapSpread > f.gap:
		return nil, exitcode.Usagef("--nemesis-gap-spread %v: want 0 to --nemesis-gap (%v)", f.gapSpread, f.gap)
	case f.length <= 0:
		return nil, exitcode.Usagef("--nemesis-length %v: want a positive duration", f.length)
	case f.lengthSpread < 0 || f.lengthSpread >= f.length:
		return nil, exitcode.Usagef("--nemesis-length-spread %v: want 0 or more and less than --nemesis-length (%v)", f.lengthSpread, f.length)
	case f.atOnce < 1:
		return nil, exitcode.Usagef("--nemesis-at-once %d: want 1 or more", f.atOnce)
	}
	if err := nemesisTargets(n, f.sources); err != nil {
		return nil, err
	}
	if f.atOnce > 1 && len(n.Sources) > 0 && f.atOnce > len(n.Sources) {
		return nil, exitcode.Usagef("--nemesis-at-once %d: more than the %d source(s) of --nemesis-sources (one fault per source at a time)", f.atOnce, len(n.Sources))
	}
	return n, nil
}

func drawList(ds []fault.Draw) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return strings.Join(out, ", ")
}

// windowsText is the per-window table and the per-kind summary
// (report.WindowsTable) under the other tables, after a blank line; ""
// when no row has them (one scripted fault: the seed's table alone).
func windowsText(rows []report.Row) string {
	if t := report.WindowsTable(rows); t != "" {
		return "\n" + t
	}
	return ""
}

// nemesisTargets reads --nemesis-sources into n: each entry a source index
// (its whole engine) or N/R (rank R of source N); a source named with
// ranks and whole draws among them.
func nemesisTargets(n *fault.Nemesis, entries []string) error {
	type target struct {
		src int
		g   fault.Grain
	}
	var seen []target
	for _, e := range entries {
		name := "source-" + e
		if src, rank, ok := strings.Cut(e, "/"); ok && !strings.HasPrefix(rank, "rank") {
			name = "source-" + src + "/rank" + rank
		}
		src, g, err := fault.ParseTarget(name)
		if err != nil {
			return exitcode.Usagef("--nemesis-sources %q: want a source index (0) or a source's rank (0/1)", e)
		}
		if slices.Contains(seen, target{src, g}) {
			return exitcode.Usagef("--nemesis-sources %s: given twice", e)
		}
		seen = append(seen, target{src, g})
		if !slices.Contains(n.Sources, src) {
			n.Sources = append(n.Sources, src)
		}
	}
	for _, t := range seen {
		if !t.g.OnRank {
			continue
		}
		if n.Grains == nil {
			n.Grains = map[int][]fault.Grain{}
		}
		for _, o := range seen {
			if o.src == t.src && !slices.Contains(n.Grains[t.src], o.g) {
				n.Grains[t.src] = append(n.Grains[t.src], o.g)
			}
		}
	}
	return nil
}
