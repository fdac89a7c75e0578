package cli

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/launch"
	"p2pfault/probe"
	"p2pfault/runner"
	"p2pfault/sim"
	"p2pfault/vcluster"
)

// clusterFlags are the flags of every command that starts engines.
type clusterFlags struct {
	engine      string
	vllmBin     string
	model       string
	gpus        []string
	sources     int
	decoders    int // --decoders: decoder engines, the probe's trials spread over them
	sourceDP    int // --source-dp: every source's --data-parallel-size
	timeScale   float64
	sourcePort  int
	decoderPort int
	p2pPort     int
	engineArgs  []string
	sourceArgs  []string // --source-arg: the sources' only
	decoderArgs []string // --decoder-arg: the decoder's only
	freePorts   bool
	loadPolicy  string
	handshake   time.Duration
	restart     time.Duration

	interval    time.Duration
	faultAt     time.Duration
	faultFor    time.Duration
	recovery    time.Duration
	warmup      time.Duration
	seedTimeout time.Duration
	pullTimeout time.Duration
	stream      bool
	link        bool   // --link: relay each decoder ↔ source pair through a link of p2pfault's
	mode        string // --mode: p2p or pd

	contentTokens int    // --content-tokens: max_tokens of seeds and pulls, compared; 0 off
	contentMatch  string // --content-match: exact or prefix:N

	bounds event.Bounds
	out    string
	attach string // --attach FILE: a cluster p2pfault did not start
	kube   kubeFlags
}

func (f *clusterFlags) register(fs *pflag.FlagSet) {
	def := check.DefaultBounds()
	fs.StringVar(&f.engine, "engine", runner.EngineSim, "engine: sim (the built-in simulated engine, no GPU), vllm (real vllm serve processes) or virtual (the simulated engine, every engine in this process on an in-memory network, no processes; its loss draws are the same every run)")
	fs.StringVar(&f.vllmBin, "vllm-bin", "vllm", "the vllm binary, with --engine vllm")
	fs.StringVar(&f.model, "model", runner.DefaultModel, "model every engine serves")
	fs.StringSliceVar(&f.gpus, "gpus", nil, "GPUs for CUDA_VISIBLE_DEVICES, round-robin over engines (--engine vllm), e.g. 0,1,2")
	fs.IntVar(&f.sources, "sources", 0, "number of source engines (default $NUM_PREFILL_INSTANCES or 2)")
	fs.IntVar(&f.decoders, "decoders", 1, fmt.Sprintf("number of decoder engines (1 to %d): with several, named decoder-0, decoder-1, ..., each source's trials go to them in turn (source i's first to decoder i mod N) and the tables break pulls down by decoder; decoder d's HTTP port is --decoder-port + d, its P2P port the d-th after the sources'", runner.MaxDecoders))
	fs.IntVar(&f.sourceDP, "source-dp", 1, fmt.Sprintf("data-parallel ranks of every source (1 to %d): each source is started with --data-parallel-size N, one front end and N engine cores, rank r's P2P port at its base + r; trials go to the ranks in turn (X-data-parallel-rank, remote_port base+r) and a fault may name one rank, source-0/rank1", runner.MaxSourceDP))
	fs.Float64Var(&f.timeScale, "time-scale", event.DefaultTimeScale, "multiply every duration of the run (timeline, rate, bounds, simulated timeouts) by this")
	fs.IntVar(&f.sourcePort, "source-port", 0, "fix source i's HTTP port to this + i (default 8100 + i, or free ports when taken)")
	fs.IntVar(&f.decoderPort, "decoder-port", 0, "fix the decoder's HTTP port (decoder d's: this + d; default 8200, or a free port when taken)")
	fs.IntVar(&f.p2pPort, "p2p-port", 0, "fix the P2P ports: source i on this + i (this + i×N with --source-dp N), the decoders after the sources (default 7777)")
	fs.StringVar(&f.loadPolicy, "kv-load-failure-policy", "recompute", "kv_load_failure_policy of every engine: recompute (a KV load that fails because its source died prefills locally) or fail (vLLM's default: the request errors)")
	fs.BoolVar(&f.freePorts, "free-ports", false, "take every port that is not fixed from a pool below the kernel's ephemeral range instead of the defaults (parallel runs, tests)")
	fs.StringArrayVar(&f.engineArgs, "engine-arg", nil, "extra argument for every engine's command line (repeatable), e.g. --engine-arg=--sim-startup-delay=1s")
	fs.StringArrayVar(&f.sourceArgs, "source-arg", nil, "extra argument for the sources' command lines only, after --engine-arg (repeatable)")
	fs.StringArrayVar(&f.decoderArgs, "decoder-arg", nil, "extra argument for the decoders' command lines only, after --engine-arg (repeatable), e.g. --decoder-arg=--block-size=64 to see the engaged gate name a block_len mismatch")
	fs.DurationVar(&f.handshake, "handshake-timeout", 0, "VLLM_P2P_HANDSHAKE_TIMEOUT_S for every engine (default: the engine's, 30s)")
	fs.DurationVar(&f.restart, "restart-length", runner.DefaultRestartLength, "how long a simulated source restarted by the kill case takes from SIGKILL to ready (scaled by --time-scale; a first start takes ~1 s); no effect with --engine vllm")

	fs.DurationVar(&f.interval, "interval", probe.DefaultInterval, "time between trials, per source")
	fs.DurationVar(&f.faultAt, "fault-at", experiment.DefaultFaultAt, "when the scripted fault fires, after warm-up")
	fs.DurationVar(&f.faultFor, "stall-for", experiment.DefaultFaultFor, "stall length (also how long a removed source stays down before the run ends, and a key-fired stall's length)")
	fs.DurationVar(&f.recovery, "recovery", experiment.DefaultRecovery, "how long the run goes on after a stall or kill window closes")
	fs.DurationVar(&f.warmup, "warmup-timeout", experiment.DefaultWarmupTimeout, "how long warm-up may take (not scaled)")
	fs.DurationVar(&f.seedTimeout, "seed-timeout", probe.DefaultSeedTimeout, "per seed request on a source")
	fs.DurationVar(&f.pullTimeout, "pull-timeout", probe.DefaultPullTimeout, "per pull request on the decoder")
	fs.BoolVar(&f.stream, "stream", false, "stream each pull (stream=true, include_usage) and record its time to first token (TTFT)")
	fs.BoolVar(&f.link, "link", false, "relay each decoder ↔ source (rank) pair's P2P control channel through a link p2pfault runs (docs/link.md), named in the pulls instead of the source: heartbeats and messages pass as they come, the engines untouched")
	fs.IntVar(&f.contentTokens, "content-tokens", probe.DefaultContentTokens, "max_tokens of every seed and pull, both greedy; check content_matches compares their texts (0: no content check, max_tokens 1 as in the seed)")
	fs.StringVar(&f.contentMatch, "content-match", "exact", "how content_matches compares a pull's text with the source's: exact, or prefix:N (the first N characters; greedy outputs of real vLLM instances can part ways by floating-point order)")
	fs.StringVar(&f.mode, "mode", event.ModeP2P, "leg of the tier each trial exercises: p2p (seed the source, then pull with remote_kv_source) or pd (a prefill leg with remote_decoder on the source, then a decode leg with remote_prefiller, as vLLM's proxy)")

	fs.DurationVar(&f.bounds.FaultedMax, "bound-faulted-max", def.FaultedMax, "check 2: pulls naming the faulted source end within this")
	fs.DurationVar(&f.bounds.DetectAfter, "bound-detect-after", def.DetectAfter, "check 3: median taken over pulls started this long after the fault")
	fs.DurationVar(&f.bounds.FaultedMedian, "bound-faulted-median", def.FaultedMedian, "check 3: their median is at most this")
	fs.Float64Var(&f.bounds.HealthyHitRate, "bound-healthy-hit-rate", def.HealthyHitRate, "check 4: fraction of pulls naming a healthy source that hit")
	fs.DurationVar(&f.bounds.HealthyMax, "bound-healthy-max", def.HealthyMax, "check 4: each pull naming a healthy source ends within this")
	fs.DurationVar(&f.bounds.RecoveryWindow, "bound-recovery-window", def.RecoveryWindow, "check 5: window after SIGCONT or the restart")
	fs.Float64Var(&f.bounds.RecoveryHitRate, "bound-recovery-hit-rate", def.RecoveryHitRate, "check 5: fraction of pulls naming the faulted source that hit again")

	fs.StringVar(&f.attach, "attach", "", "probe and fault the engines an attach file describes (engines p2pfault did not start) instead of launching a cluster; a file with a kubernetes: block is --kube and its flags (docs/attach.md)")
	f.kube.register(fs)
	fs.StringVar(&f.out, "out", "", "folder for reports, events.jsonl, engine logs and sessions.json, refused while another run holds it (default p2pfault-runs/DATE-TIME-ARM-CASE; for slice, p2pfault-runs/DATE-TIME-slice; -2, -3, ... added when a run of the same second has that one)")
}

// sourcesFromEnv honours the seed's NUM_PREFILL_INSTANCES.
// givenDecoders is --decoders when given, else 0: with --attach the file
// lists the decoders, and a --decoders given must agree with it.
func (f *clusterFlags) givenDecoders(fs *pflag.FlagSet) int {
	if !fs.Changed("decoders") {
		return 0
	}
	return f.decoders
}

func (f *clusterFlags) sourceCount(fs *pflag.FlagSet) (int, error) {
	if fs.Changed("sources") {
		if f.sources < 1 || f.sources > runner.MaxSources {
			return 0, exitcode.Usagef("--sources %d: want 1 to %d", f.sources, runner.MaxSources)
		}
		return f.sources, nil
	}
	if v, ok := os.LookupEnv("NUM_PREFILL_INSTANCES"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > runner.MaxSources {
			return 0, exitcode.Usagef("NUM_PREFILL_INSTANCES=%q: want a number of sources, 1 to %d", v, runner.MaxSources)
		}
		return n, nil
	}
	return runner.DefaultSources, nil
}

// experimentConfig builds one run's configuration from the flags, its
// cluster not yet given (launchConfig, or an attached cluster).
func (f *clusterFlags) experimentConfig(arm, caseName, out string) (experiment.Config, error) {
	if err := f.check(); err != nil {
		return experiment.Config{}, err
	}
	rule, err := check.ParseContentRule(f.contentMatch)
	if err != nil {
		return experiment.Config{}, exitcode.AsUsage(err)
	}
	return experiment.Config{
		Arm:           arm,
		Case:          caseName,
		TimeScale:     f.timeScale,
		Interval:      f.interval,
		FaultAt:       f.faultAt,
		FaultFor:      f.faultFor,
		Recovery:      f.recovery,
		Bounds:        f.bounds,
		WarmupTimeout: f.warmup,
		SeedTimeout:   f.seedTimeout,
		PullTimeout:   f.pullTimeout,
		Stream:        f.stream,
		Link:          f.link,
		ContentTokens: f.contentTokens,
		ContentMatch:  rule,
		Mode:          f.mode,
		OutDir:        out,
	}, nil
}

// check checks every flag of a run's timing and bounds, the one place
// each is checked.
func (f *clusterFlags) check() error {
	if err := f.checkTimeScale(); err != nil {
		return err
	}
	b := f.bounds
	scaled := []durationFlag{{"interval", f.interval}, {"fault-at", f.faultAt}, {"stall-for", f.faultFor}, {"recovery", f.recovery},
		{"seed-timeout", f.seedTimeout}, {"pull-timeout", f.pullTimeout},
		{"restart-length", f.restart},
		{"bound-faulted-max", b.FaultedMax}, {"bound-detect-after", b.DetectAfter},
		{"bound-faulted-median", b.FaultedMedian}, {"bound-healthy-max", b.HealthyMax},
		{"bound-recovery-window", b.RecoveryWindow}}
	for _, d := range append(scaled, durationFlag{"warmup-timeout", f.warmup}) {
		if d.v <= 0 {
			return exitcode.Usagef("--%s %v: want a positive duration", d.name, d.v)
		}
	}
	if f.engine != runner.EngineVLLM {
		// The simulated engine scales its handshake timeout too (real
		// vLLM reads it as given).
		scaled = append(scaled, durationFlag{"handshake-timeout", f.handshake})
	}
	if err := checkScaled(f.timeScale, scaled...); err != nil {
		return err
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"bound-healthy-hit-rate", b.HealthyHitRate}, {"bound-recovery-hit-rate", b.RecoveryHitRate}} {
		if r.v < 0 || r.v > 1 || math.IsNaN(r.v) {
			return exitcode.Usagef("--%s %v: want a fraction between 0 and 1", r.name, r.v)
		}
	}
	if err := checkMode("--mode", f.mode); err != nil {
		return err
	}
	switch f.engine {
	case runner.EngineSim, runner.EngineVLLM, vcluster.Engine:
	default:
		return exitcode.Usagef("--engine %q: want %s, %s or %s", f.engine, runner.EngineSim, runner.EngineVLLM, vcluster.Engine)
	}
	if f.handshake < 0 {
		return exitcode.Usagef("--handshake-timeout %v: want a positive duration (0: the engine's own)", f.handshake)
	}
	if f.contentTokens < 0 {
		return exitcode.Usagef("--content-tokens %d: want 0 (no content check) or more", f.contentTokens)
	}
	// A launched engine's context holds the prompt and the completion; an
	// attached one's is its own (an overlong request is its 400).
	if room := runner.MaxModelLen - probe.DefaultPromptTokens; f.attach == "" && f.contentTokens > room {
		return exitcode.Usagef("--content-tokens %d: want at most %d (the %d-token prompt and the completion must fit the engines' --max-model-len %d)",
			f.contentTokens, room, probe.DefaultPromptTokens, runner.MaxModelLen)
	}
	return nil
}

// checkTimeScale checks --time-scale, before any duration it scales.
func (f *clusterFlags) checkTimeScale() error {
	if !event.ValidTimeScale(f.timeScale) {
		return exitcode.Usagef("--time-scale %v: want a positive number", f.timeScale)
	}
	return nil
}

// durationFlag is a duration flag's name (without its dashes) and value.
type durationFlag struct {
	name string
	v    time.Duration
}

// checkScaled refuses the first duration flag whose value, multiplied by
// --time-scale (valid), overflows or rounds to zero (event.CheckScaled),
// naming the flag and both values: the run would record a negative
// length, or fail only when its fault fires. Every duration flag the run
// scales is checked here (clusterFlags.check, runOptions.configure); a
// timeline's steps are checked where they are scaled (experiment.New).
func checkScaled(scale float64, flags ...durationFlag) error {
	for _, f := range flags {
		if err := event.CheckScaled(f.v, scale); err != nil {
			return exitcode.Usagef("--%s %v × --time-scale %v %w", f.name, f.v, scale, err)
		}
	}
	return nil
}

// launchConfig is the engines p2pfault launches for arm, from the flags:
// the simulated arm's engine flags (armArgs) on every command line, and
// bin (a --arm NAME=VLLM_BIN build) when given.
func (f *clusterFlags) launchConfig(fs *pflag.FlagSet, arm, bin string) (runner.Config, error) {
	extra, err := armArgs(f.engine, arm)
	if err != nil {
		return runner.Config{}, err
	}
	n, err := f.sourceCount(fs)
	if err != nil {
		return runner.Config{}, err
	}
	if f.sourceDP < 1 || f.sourceDP > runner.MaxSourceDP {
		return runner.Config{}, exitcode.Usagef("--source-dp %d: want 1 to %d", f.sourceDP, runner.MaxSourceDP)
	}
	if f.decoders < 1 || f.decoders > runner.MaxDecoders {
		return runner.Config{}, exitcode.Usagef("--decoders %d: want 1 to %d", f.decoders, runner.MaxDecoders)
	}
	switch f.loadPolicy {
	case "fail", "recompute":
	default:
		return runner.Config{}, exitcode.Usagef("--kv-load-failure-policy %q: want recompute or fail", f.loadPolicy)
	}
	vllmBin := f.vllmBin
	if bin != "" {
		vllmBin = bin
	}
	engine := f.engine
	if engine == vcluster.Engine {
		engine = runner.EngineSim // the same engines, run in this process (opener)
	}
	rc := runner.Config{
		Engine:           engine,
		Sources:          n,
		Decoders:         f.decoders,
		SourceDP:         f.sourceDP,
		Model:            f.model,
		VLLMBin:          vllmBin,
		GPUs:             f.gpus,
		HandshakeTimeout: f.handshake,
		RestartDelay:     f.restart,
		// The arm's flags first: a flag the user gives wins.
		ExtraArgs:         append(append([]string{}, extra...), f.engineArgs...),
		SourceArgs:        f.sourceArgs,
		DecoderArgs:       f.decoderArgs,
		Ports:             runner.Ports{SourceHTTP: f.sourcePort, DecoderHTTP: f.decoderPort, P2P: f.p2pPort},
		FreePorts:         f.freePorts,
		LoadFailurePolicy: f.loadPolicy,
	}
	if err := f.checkSimArgs(rc); err != nil {
		return runner.Config{}, err
	}
	return rc, nil
}

// checkSimArgs checks the simulated engines' own timeouts after scaling,
// as each engine will read them (sim.CheckServe): the sim's defaults and
// those an --engine-arg, --source-arg or --decoder-arg sets, multiplied
// by the run's time scale. Every engine would refuse a scale that rounds
// one to zero as it starts, each with the same lines; said here, the
// refusal is said once, before anything starts. Flags the engines refuse
// at any scale (a misspelt one) are left to them and to doctor's
// `sim serve flags`, which names them.
func (f *clusterFlags) checkSimArgs(rc runner.Config) error {
	if rc.Engine != runner.EngineSim || f.timeScale == event.DefaultTimeScale {
		return nil
	}
	getenv := func(k string) string {
		switch {
		case k == "PYTHONHASHSEED":
			return runner.DefaultHashSeed // the runner gives every engine one
		case k == "VLLM_P2P_HANDSHAKE_TIMEOUT_S" && rc.HandshakeTimeout > 0:
			return strconv.FormatFloat(rc.HandshakeTimeout.Seconds(), 'f', -1, 64)
		}
		return os.Getenv(k)
	}
	args := func(scale float64, role []string) []string {
		a := []string{cmp.Or(rc.Model, runner.DefaultModel), "--sim-time-scale", strconv.FormatFloat(scale, 'g', -1, 64)}
		return append(append(a, rc.ExtraArgs...), role...)
	}
	for _, role := range []struct {
		whose string
		args  []string
	}{{"sources'", rc.SourceArgs}, {"decoder's", rc.DecoderArgs}} {
		err := sim.CheckServe(args(f.timeScale, role.args), getenv)
		if err != nil && sim.CheckServe(args(event.DefaultTimeScale, role.args), getenv) == nil {
			return exitcode.Usagef("--time-scale %v: the simulated %s timeouts do not scale to it: %w", f.timeScale, role.whose, err)
		}
	}
	return nil
}

// opener is how a run gets the engines rc describes: launched as
// processes, or with --engine virtual run as goroutines of this process
// on an in-memory network of their own (package vcluster). Nothing after
// this knows which.
func (f *clusterFlags) opener(rc runner.Config) experiment.Opener {
	if f.engine == vcluster.Engine {
		return vcluster.Opener{Config: rc, Seed: virtualSeed}
	}
	return launch.Opener{Config: rc}
}

// virtualSeed seeds the virtual network's loss draws: a fixed one, so a
// run with loss on the virtual cluster is the same run every time.
const virtualSeed = 1

// armArgs are the engine flags of a simulated arm (sim.Arms); with
// --engine vllm an arm is a build and adds none.
func armArgs(engine, arm string) ([]string, error) {
	if engine == runner.EngineVLLM {
		return nil, nil
	}
	if args, ok := sim.ArmArgs(arm); ok {
		return args, nil
	}
	var each []string
	for _, a := range sim.Arms {
		each = append(each, a.Name+" ("+a.Build+")")
	}
	return nil, exitcode.Usagef("arm %q: with the simulated engine the arms are %s", arm, strings.Join(each, "; "))
}

// checkMode refuses a mode p2pfault does not know, naming the flag.
func checkMode(flag, mode string) error {
	if event.CheckMode(mode) != nil || mode == "" {
		return exitcode.Usagef("%s %q: want %s or %s", flag, mode, event.ModeP2P, event.ModePD)
	}
	return nil
}

// modeCase is a case as a progress line's prefix names it: "CASE", or
// "MODE/CASE" outside mode p2p.
func modeCase(mode, caseName string) string {
	if mode == "" || mode == event.ModeP2P {
		return caseName
	}
	return mode + "/" + caseName
}
