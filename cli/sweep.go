package cli

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/runner"
	"p2pfault/sim"
)

// A slice's --sweep NAME=V1,V2,... runs every row once per value of an
// engine setting; several --sweep flags run every combination. The names
// are the settings real vLLM has (reference §3: the handshake timeout's
// environment variable, the kv-transfer-config's policy and unbound-store
// timeout) and, on the simulated engine, its own timeouts as well.

// sweepSetting is one setting --sweep can vary: how its values are read
// and how one is given to a row's engines.
type sweepSetting struct {
	name  string
	want  string // what a value is, for the error naming a bad one
	check func(v string) (any, bool)
	apply func(rc *runner.Config, v any)
	flag  string // the flag that sets it for every row, which a sweep of it replaces ("" none)
}

// vllmSettings are the settings real vLLM has, in the order the usage
// error lists them.
func vllmSettings() []sweepSetting {
	return []sweepSetting{
		{name: "VLLM_P2P_HANDSHAKE_TIMEOUT_S", want: "a positive number of seconds", check: positiveSeconds, flag: "handshake-timeout",
			apply: func(rc *runner.Config, v any) { rc.HandshakeTimeout = v.(time.Duration) }},
		{name: "kv_load_failure_policy", want: "fail or recompute", check: loadPolicy, flag: "kv-load-failure-policy",
			apply: func(rc *runner.Config, v any) { rc.LoadFailurePolicy = v.(string) }},
		{name: "unbound_store_timeout_s", want: "a positive number of seconds", check: positiveSeconds,
			apply: func(rc *runner.Config, v any) { rc.UnboundStoreTimeout = v.(time.Duration) }},
	}
}

// simSettings are the simulated engine's own: one per timeout flag of
// `sim serve`, given to every engine as that flag.
func simSettings() []sweepSetting {
	var out []sweepSetting
	for _, f := range sim.TimeoutFlags() {
		out = append(out, sweepSetting{name: f, want: "a positive duration (e.g. 5s, 500ms)", check: positiveDuration,
			apply: func(rc *runner.Config, v any) {
				rc.ExtraArgs = append(rc.ExtraArgs, "--"+f+"="+v.(time.Duration).String())
			}})
	}
	return out
}

// sweepSettings are the settings engine has.
func sweepSettings(engine string) []sweepSetting {
	if engine == runner.EngineVLLM {
		return vllmSettings()
	}
	return append(vllmSettings(), simSettings()...)
}

func positiveSeconds(v string) (any, bool) {
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || !(s > 0) || math.IsInf(s, 0) {
		return nil, false
	}
	return time.Duration(s * float64(time.Second)), true
}

func positiveDuration(v string) (any, bool) {
	d, err := time.ParseDuration(v)
	return d, err == nil && d > 0
}

func loadPolicy(v string) (any, bool) { return v, v == "fail" || v == "recompute" }

// sweepAxis is one --sweep: a setting and its values, read.
type sweepAxis struct {
	setting sweepSetting
	values  []string
	parsed  []any
}

// parseSweeps reads the --sweep flags for engine. Errors are usage errors
// naming the flag's text and what is wrong: an unknown name (listing the
// engine's), a bad value, a name or value given twice, a setting also
// fixed by its own flag.
func parseSweeps(specs []string, engine string, fs *pflag.FlagSet) ([]sweepAxis, error) {
	known := sweepSettings(engine)
	var axes []sweepAxis
	for _, spec := range specs {
		name, list, ok := strings.Cut(spec, "=")
		name = strings.TrimPrefix(name, "--")
		if !ok || name == "" || list == "" {
			return nil, exitcode.Usagef("--sweep %q: want NAME=V1,V2,...", spec)
		}
		i := slices.IndexFunc(known, func(s sweepSetting) bool { return s.name == name })
		if i < 0 {
			names := make([]string, len(known))
			for k, s := range known {
				names[k] = s.name
			}
			return nil, exitcode.Usagef("--sweep %q: engine %s has no setting %q; it has %s", spec, engine, name, strings.Join(names, ", "))
		}
		ax := sweepAxis{setting: known[i]}
		if slices.ContainsFunc(axes, func(a sweepAxis) bool { return a.setting.name == name }) {
			return nil, exitcode.Usagef("--sweep %s given twice: give its values in one flag", name)
		}
		if f := ax.setting.flag; f != "" && fs.Changed(f) {
			return nil, exitcode.Usagef("--sweep %s and --%s both set it: drop one", name, f)
		}
		for _, v := range strings.Split(list, ",") {
			p, ok := ax.setting.check(v)
			if !ok {
				return nil, exitcode.Usagef("--sweep %s: value %q is not %s", name, v, ax.setting.want)
			}
			if slices.Contains(ax.values, v) {
				return nil, exitcode.Usagef("--sweep %s: value %q given twice", name, v)
			}
			ax.values, ax.parsed = append(ax.values, v), append(ax.parsed, p)
		}
		axes = append(axes, ax)
	}
	return axes, nil
}

// checkSweepScaled checks the swept durations as checkScaled does the
// flags: the simulated engine multiplies each by the run's time scale
// (real vLLM reads its settings as given).
func checkSweepScaled(axes []sweepAxis, engine string, scale float64) error {
	if engine == runner.EngineVLLM {
		return nil
	}
	for _, ax := range axes {
		for k, p := range ax.parsed {
			d, ok := p.(time.Duration)
			if !ok {
				continue
			}
			if err := event.CheckScaled(d, scale); err != nil {
				return exitcode.Usagef("--sweep %s: value %s × --time-scale %v %w", ax.setting.name, ax.values[k], scale, err)
			}
		}
	}
	return nil
}

// sweepPoint is one combination of the axes' values: the row's settings
// as the reports name them, and the values to give its engines.
type sweepPoint struct {
	settings []event.Setting
	apply    func(rc *runner.Config)
}

// sweepPoints is every combination of the axes' values, the last axis
// varying fastest; one point without settings when there is no axis.
func sweepPoints(axes []sweepAxis) []sweepPoint {
	points := []sweepPoint{{apply: func(*runner.Config) {}}}
	for _, ax := range axes {
		var next []sweepPoint
		for _, p := range points {
			for k, v := range ax.values {
				prev, set, parsed := p.apply, ax.setting.apply, ax.parsed[k]
				next = append(next, sweepPoint{
					settings: append(slices.Clone(p.settings), event.Setting{Name: ax.setting.name, Value: v}),
					apply:    func(rc *runner.Config) { prev(rc); set(rc, parsed) },
				})
			}
		}
		points = next
	}
	return points
}
