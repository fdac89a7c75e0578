// Package runner starts and supervises the engines of one p2pfault run: N
// sources and a decoder, each `p2pfault sim serve` or `vllm serve` from one
// command-line template, each in a session of its own so a fault or a stop
// reaches every process of exactly that engine. It waits for readiness,
// keeps logs, restarts an engine on the same ports, records the run's
// session ids in OUT/sessions.json and ends everything it started.
//
// Cleanup guarantee: engines start with Setsid and Pdeathsig=SIGKILL from a
// goroutine locked to its OS thread for the cluster's whole life (Go's
// Pdeathsig fires when the forking *thread* exits, not the process), so an
// engine dies when p2pfault dies, whatever the cause: SIGKILL, a panic in
// any goroutine, or a normal exit that skipped Stop. Stop itself (normal
// end, cancelled context) resumes stopped engines, sends SIGTERM, SIGKILL
// after the grace, and reaps. What Pdeathsig cannot reach (a child that left
// the session's parent, a vLLM worker) is named in sessions.json for Cleanup.
package runner

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
)

// Engine kinds.
const (
	EngineSim  = "sim"
	EngineVLLM = "vllm"
)

// Defaults of vLLM's tests/v1/kv_offload/tiering/p2p/run_accuracy_test.sh
// (reference §1) and of the design.
const (
	DefaultModel   = "meta-llama/Llama-3.2-1B-Instruct"
	DefaultSources = 2
	MaxSources     = 64 // a cap on the cluster a run starts; the default ports leave room for it
	// MaxDecoders caps --decoders: decoder d listens on the decoder HTTP
	// base + d, so the default bases (8100 for 64 sources, 8200) leave
	// room for this many below the ephemeral range.
	MaxDecoders = 16
	// MaxSourceDP caps --source-dp: the data-parallel ranks of one source,
	// each an engine core with a P2P port of its own.
	MaxSourceDP            = 16
	DefaultSourceHTTPPort  = 8100
	DefaultDecoderHTTPPort = 8200
	DefaultP2PPort         = 7777
	DefaultHashSeed        = "42"
	DefaultCPUBytes        = 209715200
	// MaxModelLen is every engine's --max-model-len: a prompt and its
	// completion must fit in it.
	MaxModelLen            = 512
	DefaultStopGrace       = 10 * time.Second
	DefaultSimReadyTimeout = 60 * time.Second
	// DefaultVLLMReadyTimeout is how long a vllm serve may take to answer
	// /health: the script waits 1200 s for each, model load can be slow.
	// An attached engine is waited for as long (package attach).
	DefaultVLLMReadyTimeout = 1200 * time.Second
	// DefaultRestartLength is a real vLLM restart of Llama-3.2-1B from
	// SIGKILL to ready: the seed's kill row saw n = 58 pulls at 2 trials/s
	// in that window, so ~29 s. It is the default of RestartDelay's flag
	// (--restart-length): the simulated engine waits this long on a
	// restart, and ~1 s on a first start, so p2pfault opens fast.
	DefaultRestartLength = 29 * time.Second
	// HealthTimeout bounds one GET /health, of an engine p2pfault started
	// or of an attached one.
	HealthTimeout  = 2 * time.Second
	DefaultLogTail = 1000
	Host           = "127.0.0.1"
)

// Ports are the base ports of a run. Source i listens on SourceHTTP+i and
// P2P+i; decoder d on DecoderHTTP+d and P2P+Sources+d. A zero base means the
// script's default (8100, 8200, 7777), replaced by a free port when taken; a
// non-zero base is fixed by the user, and a taken fixed port is an error.
type Ports struct {
	SourceHTTP  int
	DecoderHTTP int
	P2P         int
}

// Config describes a cluster. The zero value plus OutDir is a valid
// simulated cluster of two sources and a decoder. The values the command
// line reads from flags (Sources, TimeScale, HandshakeTimeout,
// RestartDelay, LoadFailurePolicy) are checked there, once (package cli);
// what only the runner can judge (the engine, GPUs, environment, ports,
// arguments) is checked by Plan.
type Config struct {
	Engine  string // EngineSim (default) or EngineVLLM
	Sources int    // number of source engines; 0 = 2 (NUM_PREFILL_INSTANCES)
	// Decoders is the number of decoder engines; 0 = 1. With one it is
	// named "decoder", as before; with several "decoder-0", "decoder-1", ...
	Decoders int
	Model    string // default DefaultModel
	// SourceDP is every source's --data-parallel-size: one front end and
	// SourceDP engine cores, rank r's P2P port at the source's base + r
	// (vLLM #47636). 0 or 1: one engine core, as before.
	SourceDP int

	SelfBin string   // p2pfault itself, for `sim serve`; default os.Executable()
	VLLMBin string   // default "vllm", looked up on PATH at Start
	GPUs    []string // CUDA_VISIBLE_DEVICES round-robin over engines (vllm only); empty: unset

	HashSeed         string        // PYTHONHASHSEED of every engine; default "42"
	TimeScale        float64       // the simulator's --sim-time-scale; 0 = event.DefaultTimeScale
	HandshakeTimeout time.Duration // VLLM_P2P_HANDSHAKE_TIMEOUT_S; 0 = the engine's default (30 s)
	// RestartDelay is how long a simulated engine restarted by Restart or
	// Restore takes to load its model (its --sim-startup-delay, which the
	// sim scales by the time scale): a real vLLM restart takes
	// DefaultRestartLength, a first start of the sim ~1 s so the tool opens
	// fast. 0 = as long as the first start. No effect on vllm, whose
	// restart takes what it takes.
	RestartDelay time.Duration

	// LoadFailurePolicy goes into every engine's kv-transfer-config as
	// kv_load_failure_policy: "fail", "recompute", or "" for the engine's
	// default (fail).
	LoadFailurePolicy string
	// UnboundStoreTimeout goes into the p2p tier's entry of every engine's
	// kv-transfer-config as unbound_store_timeout_s (#53453): how long a
	// PD prefill's parked blocks wait for their fetch. 0 = the engine's
	// default (60 s).
	UnboundStoreTimeout time.Duration

	ExtraArgs   []string // appended to every engine's argv
	SourceArgs  []string // appended to the sources' argv, after ExtraArgs
	DecoderArgs []string // appended to every decoder's argv, after ExtraArgs
	Env         []string // KEY=VALUE added to every engine's environment

	Ports     Ports
	FreePorts bool // take every port that is not fixed from PortPool, ignoring the defaults (tests, parallel runs)
	// PortPool hands out free ports; clusters started side by side share
	// one so they never pick the same port. nil = a pool of this Start.
	PortPool *PortPool

	OutDir       string        // engine logs (NAME.log) and sessions.json; required by Start
	ReadyTimeout time.Duration // per engine start; 0 = 60 s (sim) or 1200 s (vllm)
	StopGrace    time.Duration // SIGTERM to SIGKILL; 0 = 10 s
	LogTail      int           // log lines kept in memory per engine; 0 = 1000

	// OnLog receives every line an engine prints, OnChange every state
	// change, in order, from one goroutine. They must not block for long
	// and must not call Cluster.Stop.
	OnLog    func(engine, line string)
	OnChange func(event.EngineInfo)
}

// withDefaults returns cfg with zero fields set to their defaults and checks
// what Plan needs. Errors are usage errors naming the field.
func (cfg Config) withDefaults() (Config, error) {
	switch cfg.Engine {
	case "":
		cfg.Engine = EngineSim
	case EngineSim, EngineVLLM:
	default:
		return cfg, exitcode.Usagef("engine %q: want %q or %q", cfg.Engine, EngineSim, EngineVLLM)
	}
	if cfg.Sources == 0 {
		cfg.Sources = DefaultSources
	}
	if cfg.Decoders == 0 {
		cfg.Decoders = 1
	}
	if cfg.Decoders < 0 || cfg.Decoders > MaxDecoders {
		return cfg, exitcode.Usagef("decoders %d: want 1-%d", cfg.Decoders, MaxDecoders)
	}
	if cfg.SourceDP < 0 || cfg.SourceDP > MaxSourceDP {
		return cfg, exitcode.Usagef("source data-parallel size %d: want 1-%d", cfg.SourceDP, MaxSourceDP)
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.VLLMBin == "" {
		cfg.VLLMBin = "vllm"
	}
	if cfg.HashSeed == "" {
		cfg.HashSeed = DefaultHashSeed
	}
	if strings.ContainsAny(cfg.HashSeed, " \t\n=") {
		return cfg, exitcode.Usagef("hash seed %q: want a number", cfg.HashSeed)
	}
	cfg.TimeScale = event.TimeScaleOf(cfg.TimeScale)
	for i, g := range cfg.GPUs {
		if g == "" || strings.ContainsAny(g, ", \t\n") {
			return cfg, exitcode.Usagef("GPU %d %q: want one device id or UUID", i, g)
		}
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return cfg, exitcode.Usagef("environment entry %q: want KEY=VALUE", kv)
		}
	}
	if cfg.Engine == EngineVLLM {
		for _, list := range [][]string{cfg.ExtraArgs, cfg.SourceArgs, cfg.DecoderArgs} {
			for _, a := range list {
				if strings.HasPrefix(a, "--sim-") {
					return cfg, exitcode.Usagef("engine argument %q is for the simulated engine only, not vllm", a)
				}
			}
		}
	}
	for _, p := range []struct {
		name string
		port int
	}{{"source HTTP", cfg.Ports.SourceHTTP}, {"decoder HTTP", cfg.Ports.DecoderHTTP}, {"P2P", cfg.Ports.P2P}} {
		if p.port < 0 || p.port > 65535 {
			return cfg, exitcode.Usagef("%s port %d: want 1-65535", p.name, p.port)
		}
	}
	if cfg.ReadyTimeout < 0 || cfg.StopGrace < 0 || cfg.LogTail < 0 {
		return cfg, exitcode.Usagef("ready timeout %v, stop grace %v, log tail %d: none may be negative",
			cfg.ReadyTimeout, cfg.StopGrace, cfg.LogTail)
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = DefaultSimReadyTimeout
		if cfg.Engine == EngineVLLM {
			cfg.ReadyTimeout = DefaultVLLMReadyTimeout
		}
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.LogTail == 0 {
		cfg.LogTail = DefaultLogTail
	}
	return cfg, nil
}

// formatSeconds renders d as vLLM's *_S environment variables expect it.
func formatSeconds(d time.Duration) string {
	return fmt.Sprintf("%g", d.Seconds())
}
