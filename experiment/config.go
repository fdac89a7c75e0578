package experiment

import (
	"math"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
)

// Defaults of the seed, at real time (--time-scale multiplies them).
const (
	DefaultFaultAt       = 10 * time.Second // fault on source 0, 10 s into the measured run
	DefaultFaultFor      = 30 * time.Second // stall length; how long a removed source stays down before the run ends
	DefaultRecovery      = 25 * time.Second // measured after the fault window of stall and kill
	DefaultNoneDuration  = 30 * time.Second // headless case none: length of the measured run
	DefaultWarmupTimeout = 60 * time.Second // not scaled: first sessions can be slow on real engines
	DefaultSeedTimeout   = 1 * time.Second  // scaled; a healthy seed takes ~10 ms, and a longer wait delays the faulted pulls behind it
	DefaultPullTimeout   = 60 * time.Second // longer than the slowest real outcome (30 s + 10 s)
)

// Config is one run. Durations are at real time; the experiment multiplies
// them (and the bounds, and the simulated engines' timeouts) by TimeScale.
type Config struct {
	Arm  string // label of the row: "main", "fixed", or a --arm NAME
	Case string // a fault case (fault.Cases) or fault.CaseNone; "" is none

	// Cluster opens the run's engines: Launch{runner.Config} for engines
	// p2pfault starts, an attach.Cluster for engines it did not start.
	Cluster   Opener
	TimeScale float64 // 0 = 1

	Interval      time.Duration // between trials per source; 0 = 500 ms
	FaultAt       time.Duration // scripted fault time since t0; 0 = 10 s
	FaultFor      time.Duration // stall length, or how long a removed source stays down; 0 = 30 s
	Recovery      time.Duration // recovery window after the fault window; 0 = 25 s
	Duration      time.Duration // case none: measured run length; 0 = until the context ends (dashboard)
	Timeline      string        // a scripted timeline replacing the case's preset ("" = the preset)
	Bounds        event.Bounds  // zero value = check.DefaultBounds()
	WarmupTimeout time.Duration // 0 = 60 s, not scaled
	SeedTimeout   time.Duration // 0 = 2 s
	PullTimeout   time.Duration // 0 = 60 s
	PromptTokens  int           // 0 = the probe's default (3 blocks + 16)
	Stream        bool          // streamed pulls with TTFT (probe.Config.Stream)

	OutDir string // engine logs and sessions.json; required
}

func (c Config) withDefaults() (Config, error) {
	if c.Case == "" {
		c.Case = fault.CaseNone
	}
	if c.Arm == "" {
		c.Arm = "main"
	}
	switch {
	case c.TimeScale == 0:
		c.TimeScale = 1
	case c.TimeScale < 0 || math.IsNaN(c.TimeScale) || math.IsInf(c.TimeScale, 0):
		return c, exitcode.Usagef("time scale %v: want a positive number", c.TimeScale)
	}
	def := func(d *time.Duration, v time.Duration, name string) error {
		if *d < 0 {
			return exitcode.Usagef("%s %v: want a positive duration", name, *d)
		}
		if *d == 0 {
			*d = v
		}
		return nil
	}
	for _, f := range []struct {
		d    *time.Duration
		v    time.Duration
		name string
	}{
		{&c.Interval, 500 * time.Millisecond, "interval"},
		{&c.FaultAt, DefaultFaultAt, "fault-at"},
		{&c.FaultFor, DefaultFaultFor, "fault-for"},
		{&c.Recovery, DefaultRecovery, "recovery"},
		{&c.WarmupTimeout, DefaultWarmupTimeout, "warm-up timeout"},
		{&c.SeedTimeout, DefaultSeedTimeout, "seed timeout"},
		{&c.PullTimeout, DefaultPullTimeout, "pull timeout"},
	} {
		if err := def(f.d, f.v, f.name); err != nil {
			return c, err
		}
	}
	if c.Duration < 0 {
		return c, exitcode.Usagef("duration %v: want a positive duration", c.Duration)
	}
	if c.Bounds == (event.Bounds{}) {
		c.Bounds = check.DefaultBounds()
	}
	if err := validBounds(c.Bounds); err != nil {
		return c, err
	}
	if c.OutDir == "" {
		return c, exitcode.Usagef("no output folder given")
	}
	if c.Cluster == nil {
		return c, exitcode.Usagef("no cluster to run on")
	}
	return c, nil
}

func validBounds(b event.Bounds) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"bound-faulted-max", b.FaultedMax}, {"bound-detect-after", b.DetectAfter},
		{"bound-faulted-median", b.FaultedMedian}, {"bound-healthy-max", b.HealthyMax},
		{"bound-recovery-window", b.RecoveryWindow},
	} {
		if d.v <= 0 {
			return exitcode.Usagef("%s %v: want a positive duration", d.name, d.v)
		}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"bound-healthy-hit-rate", b.HealthyHitRate}, {"bound-recovery-hit-rate", b.RecoveryHitRate}} {
		if r.v < 0 || r.v > 1 || math.IsNaN(r.v) {
			return exitcode.Usagef("%s %v: want a fraction between 0 and 1", r.name, r.v)
		}
	}
	return nil
}

// scale multiplies a real-time duration by the run's time scale.
func (c Config) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.TimeScale)
}

// scriptedTimeline is the run's timeline at real time: the user's
// --timeline, or the case's preset (fault.Preset: an unknown case is a
// usage error naming the cases) at this run's
// fault time and stall length (the seed's 10 s and 30 s by default).
func (c Config) scriptedTimeline() (fault.Timeline, error) {
	if c.Timeline != "" {
		return fault.Parse(c.Timeline)
	}
	return fault.Preset(c.Case, c.FaultAt, c.FaultFor)
}
