package experiment

import (
	"math"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/probe"
)

// Defaults of the seed, at real time (--time-scale multiplies them).
const (
	DefaultFaultAt       = 10 * time.Second // fault on source 0, 10 s into the measured run
	DefaultFaultFor      = 30 * time.Second // stall length; how long a removed source stays down before the run ends
	DefaultRecovery      = 25 * time.Second // measured after the fault window of stall and kill
	DefaultNoneDuration  = 30 * time.Second // headless case none: length of the measured run
	DefaultWarmupTimeout = 60 * time.Second // not scaled: first sessions can be slow on real engines
	// DefaultUnboundStoreTimeout is vLLM's unbound_store_timeout_s
	// (manager.py _UNBOUND_STORE_TIMEOUT_S, a setting since #53453).
	DefaultUnboundStoreTimeout = 60 * time.Second
)

// Config is one run. Durations are at real time; the experiment multiplies
// them (and the bounds, and the simulated engines' timeouts) by TimeScale.
// Zero values take the defaults noted; the values are not checked here:
// the command line checks every flag once, where it is read (package cli).
type Config struct {
	Arm  string // label of the row: "main", "fixed", or a --arm NAME
	Case string // a fault case (fault.Cases) or fault.CaseNone; "" is none
	// Mode is the leg of the tier the probe exercises: event.ModeP2P ("")
	// or event.ModePD (probe.Config.Mode).
	Mode string
	// Settings label the row with the engine settings a slice's --sweep
	// gave its cluster (the cluster's own configuration applies them);
	// carried on the run event for the reports.
	Settings []event.Setting

	// Cluster opens the run's engines: a launch.Opener for engines
	// p2pfault starts, a vcluster.Opener for the virtual cluster, an
	// attach.Cluster for engines it did not start.
	Cluster   Opener
	TimeScale float64 // 0 = 1

	Interval time.Duration // between trials per source; 0 = probe.DefaultInterval
	FaultAt  time.Duration // scripted fault time since t0; 0 = 10 s
	FaultFor time.Duration // stall length, or how long a removed source stays down; 0 = 30 s
	Recovery time.Duration // recovery window after the fault window; 0 = 25 s
	Duration time.Duration // case none: measured run length; 0 = until the context ends (dashboard)
	Timeline string        // a scripted timeline replacing the case's preset ("" = the preset)
	// Nemesis draws the run's schedule from a seed instead (nemesis.go):
	// faults until Duration, which it needs; Case and Timeline are then
	// none and "".
	Nemesis       *fault.Nemesis
	Bounds        event.Bounds  // zero value = check.DefaultBounds()
	WarmupTimeout time.Duration // 0 = 60 s, not scaled
	SeedTimeout   time.Duration // per seed request; 0 = probe.DefaultSeedTimeout (scaled, as every duration here)
	PullTimeout   time.Duration // per pull request; 0 = probe.DefaultPullTimeout
	PromptTokens  int           // 0 = the probe's default (3 blocks + 16)
	Stream        bool          // streamed pulls with TTFT (probe.Config.Stream)
	// Link relays each decoder ↔ source rank pair through a link of
	// p2pfault's (package relay) named in the pulls instead of the source
	// (link.go): what the message kinds act on.
	Link bool
	// ContentTokens is the max_tokens of every seed and pull, whose texts
	// are compared (probe.Config.ContentTokens); 0: no content check.
	// ContentMatch is the rule content_matches judges them by; off (the
	// zero value) with ContentTokens > 0 is exact.
	ContentTokens int
	ContentMatch  check.ContentRule

	// ProbeHold is a test's stand-in for a loaded machine: the lag it
	// injects into the probe (probe.Config.Hold); nil in a run.
	ProbeHold func(i int, k int64) time.Duration

	OutDir string // engine logs and sessions.json; required
}

func (c Config) withDefaults() (Config, error) {
	if c.Case == "" {
		c.Case = fault.CaseNone
	}
	if c.Arm == "" {
		c.Arm = "main"
	}
	if err := event.CheckMode(c.Mode); err != nil {
		return c, exitcode.AsUsage(err)
	}
	c.Mode = event.ModeOf(c.Mode)
	c.TimeScale = event.TimeScaleOf(c.TimeScale)
	for _, f := range []struct {
		d *time.Duration
		v time.Duration
	}{
		{&c.Interval, probe.DefaultInterval},
		{&c.FaultAt, DefaultFaultAt},
		{&c.FaultFor, DefaultFaultFor},
		{&c.Recovery, DefaultRecovery},
		{&c.WarmupTimeout, DefaultWarmupTimeout},
		{&c.SeedTimeout, probe.DefaultSeedTimeout},
		{&c.PullTimeout, probe.DefaultPullTimeout},
	} {
		if *f.d == 0 {
			*f.d = f.v
		}
	}
	if c.Bounds == (event.Bounds{}) {
		c.Bounds = check.DefaultBounds()
	}
	c.ContentMatch.On = c.ContentTokens > 0
	if c.OutDir == "" {
		return c, exitcode.Usagef("no output folder given")
	}
	if c.Cluster == nil {
		return c, exitcode.Usagef("no cluster to run on")
	}
	return c, nil
}

// scale multiplies a real-time duration by the run's time scale.
func (c Config) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.TimeScale)
}

// scaleTimeline multiplies every step's time and length by the run's time
// scale, refusing (exit 2) a step whose time or length overflows or
// rounds to zero once scaled (event.CheckScaled; a length of zero would
// make a timed stall untimed), or whose window and recovery end past the
// longest duration: the run would record a negative length. The flags the
// preset and a nemesis draw from are checked where they are read
// (package cli); a --timeline's durations are checked here, where they
// are scaled.
func (c Config) scaleTimeline(tl fault.Timeline) error {
	tail := float64(c.scale(c.Recovery)) + float64(c.scale(c.FaultFor))
	for i := range tl {
		s := &tl[i]
		for _, d := range []struct {
			word string
			v    *time.Duration
		}{{"at", &s.At}, {"for", &s.For}} {
			if err := event.CheckScaled(*d.v, c.TimeScale); err != nil {
				return exitcode.Usagef("timeline step %q: %s %v × --time-scale %v %w", s.String(), d.word, *d.v, c.TimeScale, err)
			}
		}
		if end := (float64(s.At)+float64(s.For))*c.TimeScale + tail; end >= float64(math.MaxInt64) {
			return exitcode.Usagef("timeline step %q × --time-scale %v: the step and the run after it (--recovery %v, --stall-for %v) end past the longest duration (%v)",
				s.String(), c.TimeScale, c.Recovery, c.FaultFor, time.Duration(math.MaxInt64).Truncate(time.Second))
		}
		s.At, s.For = c.scale(s.At), c.scale(s.For)
	}
	return nil
}

// scriptedTimeline is the run's timeline at real time: the user's
// --timeline, or the case's preset (fault.Preset: an unknown case is a
// usage error naming the cases) at this run's
// fault time and stall length (the seed's 10 s and 30 s by default).
func (c Config) scriptedTimeline() (fault.Timeline, error) {
	if c.Nemesis != nil {
		return nil, nil // drawn once the cluster's sources are known (New)
	}
	if c.Timeline != "" {
		return fault.Parse(c.Timeline)
	}
	return fault.Preset(c.Case, c.FaultAt, c.FaultFor)
}
