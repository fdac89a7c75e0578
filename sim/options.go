package sim

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/sim/engine"
)

// serveFlags are the command-line flags of `sim serve`, as parsed.
type serveFlags struct {
	host                string
	port                int
	kvTransferConfig    string
	blockSize           int
	maxModelLen         int
	maxNumBatchedTokens int
	promptTokensDetails bool
	gpuMemUtil          float64
	enforceEager        bool
	tpSize              int
	dpSize              int
	seed                int64
	pendingHandshake    string
	lookupDeadline      string
	deadSessionLoads    string
	disableLogStats     bool

	timeScale         float64
	lookupTimeout     time.Duration
	heartbeatInterval time.Duration
	heartbeatTimeout  time.Duration
	lookupHold        time.Duration
	prefillPerToken   time.Duration
	decodePerToken    time.Duration
	attentionContext  int
	registerPerBlock  time.Duration
	transferBandwidth float64
	kvBytesPerToken   int
	startupDelay      time.Duration
	tick              time.Duration
	staleRoute        bool
	freezeGap         time.Duration
	loadTimeout       time.Duration
	abortAckTimeout   time.Duration
	storeTimeout      time.Duration
	defects           []string
}

// defectNames are the --sim-defect values, each a modelled vLLM bug
// (engine.Defects).
var defectNames = []string{"reuse-freed-blocks", "recompute-keeps-partial", "leak-unbound-stores"}

func (f *serveFlags) register(fs *pflag.FlagSet) {
	// vLLM's flags (reference §1).
	fs.StringVar(&f.host, "host", "127.0.0.1", "HTTP bind host (loopback only)")
	fs.IntVar(&f.port, "port", 8000, "HTTP port (0 picks a free one, logged at startup)")
	fs.StringVar(&f.kvTransferConfig, "kv-transfer-config", "", "OffloadingConnector JSON with a TieringOffloadingSpec and a p2p secondary tier")
	fs.IntVar(&f.blockSize, "block-size", 16, "tokens per KV block")
	fs.IntVar(&f.maxModelLen, "max-model-len", 2048, "longest prompt + completion in tokens")
	fs.IntVar(&f.maxNumBatchedTokens, "max-num-batched-tokens", engine.DefaultMaxNumBatchedTokens, "token budget of one scheduler step: longer prompts are prefilled in chunks of it (vLLM's default for the API server)")
	fs.BoolVar(&f.promptTokensDetails, "enable-prompt-tokens-details", false, "report usage.prompt_tokens_details.cached_tokens")
	fs.Float64Var(&f.gpuMemUtil, "gpu-memory-utilization", 0.9, "fraction of the (simulated) GPU for the KV cache, in (0, 1]")
	fs.BoolVar(&f.enforceEager, "enforce-eager", false, "accepted for compatibility; no effect")
	fs.IntVar(&f.tpSize, "tensor-parallel-size", 1, "tensor-parallel size (part of the P2P config fingerprint)")
	fs.IntVar(&f.dpSize, "data-parallel-size", 1, "data-parallel ranks: one engine-core child per rank, each with its own CPU tier and P2P manager; rank r binds P2P at the base port + r")
	fs.Int64Var(&f.seed, "seed", 0, "sampling seed (accepted; the sim's output is deterministic)")
	fs.BoolVar(&f.disableLogStats, "disable-log-stats", false, "do not print the periodic stats line (throughput, queues, prefix cache hit rates)")
	fs.StringVar(&f.pendingHandshake, "p2p-pending-handshake", "wait", "a request meeting a pending P2P handshake: wait (vLLM main) or prefill (vLLM PR #64501)")

	// Sim knobs.
	fs.Float64Var(&f.timeScale, "sim-time-scale", event.DefaultTimeScale, "multiplies every sim timeout and delay (not the tick, compute or transfer time)")
	fs.DurationVar(&f.lookupTimeout, "sim-lookup-timeout", 8*time.Second, "the lookup deadline's length (--sim-lookup-deadline): at it the P2P session is reaped and its waiting pulls prefill locally")
	fs.StringVar(&f.lookupDeadline, "sim-lookup-deadline", "silence", "what ends a lookup a live peer never answers: silence (the seed's build: the peer silent, or one lookup unanswered, for --sim-lookup-timeout), none (vLLM main @099ef822: nothing, the pull waits until its client gives up) or progress (vLLM PR #56836: one lookup unanswered for --sim-lookup-timeout, heartbeats or not)")
	fs.DurationVar(&f.heartbeatInterval, "sim-heartbeat-interval", 2*time.Second, "ping interval on ready P2P sessions")
	fs.DurationVar(&f.heartbeatTimeout, "sim-heartbeat-timeout", 10*time.Second, "silence after a ping that kills a P2P session")
	fs.DurationVar(&f.lookupHold, "sim-lookup-hold", 5*time.Second, "how long a source holds a lookup on blocks it is still computing")
	fs.DurationVar(&f.prefillPerToken, "sim-prefill-per-token", 26*time.Microsecond, "compute cost of each token a scheduler step takes (prefill chunks and decode tokens)")
	fs.DurationVar(&f.decodePerToken, "sim-decode-per-token", 2*time.Millisecond, "shortest scheduler step that decodes: the cost of one generated token")
	fs.IntVar(&f.attentionContext, "sim-attention-context", 29700, "context in tokens at which a token's attention costs as much as the rest of its forward pass (a token at position p costs --sim-prefill-per-token × (1 + p/this); 29700 = Llama-3.2-1B's N/(n_layer·d_attn)); 0: no attention term")
	fs.DurationVar(&f.registerPerBlock, "sim-register-per-block", 1400*time.Nanosecond, "scheduler-loop cost of registering a peer per CPU block it describes, on connect (vLLM #57165: 14-40 ms over 19,599 blocks)")
	fs.Float64Var(&f.transferBandwidth, "sim-transfer-bandwidth", 10e9, "P2P transfer bandwidth in bytes/s")
	fs.IntVar(&f.kvBytesPerToken, "sim-kv-bytes-per-token", 32768, "KV bytes per token (32768 = Llama-3.2-1B fp16)")
	fs.DurationVar(&f.startupDelay, "sim-startup-delay", time.Second, "simulated model load before the engine binds its ports (p2pfault sets a real restart's length, --restart-length, when it restarts an engine)")
	fs.DurationVar(&f.tick, "sim-tick", 5*time.Millisecond, "scheduler step period")
	fs.BoolVar(&f.staleRoute, "sim-stale-route", true, "after a freeze, drop the first reconnect of a peer into its stale route (vLLM's ZMQ gap)")
	fs.DurationVar(&f.freezeGap, "sim-freeze-gap", 500*time.Millisecond, "a gap between steps over this means the process was frozen")
	fs.DurationVar(&f.loadTimeout, "sim-load-timeout", 30*time.Second, "fetch without transfer_done before the abort")
	fs.DurationVar(&f.abortAckTimeout, "sim-abort-ack-timeout", 10*time.Second, "abort without abort_ack before the load fails")
	fs.StringVar(&f.deadSessionLoads, "sim-dead-session-loads", "fail", "loads in flight on a P2P session reaped for silence (heartbeat, lookup deadline): fail with it (session.py @0577fc22) or timeout: run to the load timeout, then fail when the abort goes unacknowledged (vLLM issue #56828)")
	fs.StringArrayVar(&f.defects, "sim-defect", nil, "turn on a modelled engine bug (repeatable): reuse-freed-blocks (vllm#21570), recompute-keeps-partial (vllm#49250), leak-unbound-stores (a PD prefiller that never reaps a parked store no fetch binds); each changes nothing until its trigger happens")
	fs.DurationVar(&f.storeTimeout, "sim-store-timeout", 30*time.Second, "a source's store job (a lookup hit's pin, a PD store bound to a fetch) not sent within this fails and frees its blocks")
}

// TimeoutFlags are the `sim serve` flags (without their dashes) that set
// one of the engine's timeouts or timer periods, each a duration: what a
// slice's --sweep may vary on the simulated engine beside the settings
// real vLLM has.
func TimeoutFlags() []string {
	return []string{"sim-lookup-timeout", "sim-heartbeat-interval", "sim-heartbeat-timeout", "sim-lookup-hold",
		"sim-load-timeout", "sim-abort-ack-timeout", "sim-store-timeout"}
}

// serveConfig is a validated `sim serve` configuration.
type serveConfig struct {
	Model               string
	Host                string
	Port                int
	MaxModelLen         int
	PromptTokensDetails bool
	DPSize              int           // --data-parallel-size: engine cores, one per rank
	StartupDelay        time.Duration // scaled
	HashSeedRandom      bool          // PYTHONHASHSEED was unset
	Engine              engine.Config
}

// rankEngine is rank r's engine configuration: vLLM runs one P2P manager
// per data-parallel rank, bound at base_port + data_parallel_index (PR
// #47636, reference §11); a base of 0 (a free port, a sim extension) gives
// each rank a free port of its own. Each rank has its own tiers, sized
// alike.
func (c serveConfig) rankEngine(r int) engine.Config {
	e := c.Engine
	if e.P2P && e.P2PPort != 0 {
		e.P2PPort += r
	}
	return e
}

// gpuBlocksPerUtil sizes the simulated GPU prefix cache: blocks at a
// gpu-memory-utilization of 1.0. It only needs to be large enough that the
// probe's unique prompts never depend on it.
const gpuBlocksPerUtil = 8192

// resolve validates the flags and environment. Every error is a usage error
// naming the flag, key or variable at fault. It is four parts: the flags'
// own checks, vLLM's environment, the kv-transfer-config, and the engine
// configuration they make (checked once more as a whole).
func (f *serveFlags) resolve(model string, getenv func(string) string) (serveConfig, error) {
	mode, err := f.check(model)
	if err != nil {
		return serveConfig{}, err
	}
	env, err := resolveEnv(getenv, f.disableLogStats)
	if err != nil {
		return serveConfig{}, err
	}
	kvt, err := f.kvTransfer(getenv)
	if err != nil {
		return serveConfig{}, err
	}
	if kvt.P2P && kvt.P2PPort > 0 && kvt.P2PPort+f.dpSize-1 > 65535 {
		return serveConfig{}, exitcode.Usagef("--data-parallel-size %d: the P2P ports %d..%d (base + rank) pass 65535", f.dpSize, kvt.P2PPort, kvt.P2PPort+f.dpSize-1)
	}
	c := f.build(model, mode, env, kvt)
	// A scale small enough to round a timeout to zero is a bad scale.
	if err := c.Engine.Validate(); err != nil {
		return serveConfig{}, exitcode.Usagef("--sim-time-scale %g: %v", f.timeScale, err)
	}
	return c, nil
}

// check validates each flag on its own and returns the pending-handshake
// mode it names.
func (f *serveFlags) check(model string) (engine.PendingMode, error) {
	fail := func(format string, args ...any) (engine.PendingMode, error) {
		return 0, exitcode.Usagef(format, args...)
	}
	if strings.TrimSpace(model) == "" {
		return fail("MODEL must not be empty")
	}
	if !isLoopback(f.host) {
		return fail("--host %q: the sim serves on loopback only (127.0.0.1, ::1 or localhost)", f.host)
	}
	if f.port < 0 || f.port > 65535 {
		return fail("--port %d: want 0..65535", f.port)
	}
	for _, v := range []struct {
		name string
		val  int
	}{{"--block-size", f.blockSize}, {"--max-model-len", f.maxModelLen}, {"--max-num-batched-tokens", f.maxNumBatchedTokens}, {"--tensor-parallel-size", f.tpSize}, {"--data-parallel-size", f.dpSize}, {"--sim-kv-bytes-per-token", f.kvBytesPerToken}} {
		if v.val <= 0 {
			return fail("%s %d: must be positive", v.name, v.val)
		}
	}
	if f.attentionContext < 0 {
		return fail("--sim-attention-context %d: must not be negative (0: no attention term)", f.attentionContext)
	}
	if !(f.gpuMemUtil > 0 && f.gpuMemUtil <= 1) {
		return fail("--gpu-memory-utilization %g: want a fraction in (0, 1]", f.gpuMemUtil)
	}
	var mode engine.PendingMode
	switch f.pendingHandshake {
	case "wait":
		mode = engine.PendingWait
	case "prefill":
		mode = engine.PendingPrefill
	default:
		return fail("--p2p-pending-handshake %q: want wait or prefill", f.pendingHandshake)
	}
	if !event.ValidTimeScale(f.timeScale) {
		return fail("--sim-time-scale %g: must be a positive number", f.timeScale)
	}
	if !(f.transferBandwidth > 0) || math.IsInf(f.transferBandwidth, 0) {
		return fail("--sim-transfer-bandwidth %g: must be a positive number of bytes/s", f.transferBandwidth)
	}
	if err := f.checkDurations(); err != nil {
		return 0, err
	}
	if _, ok := engine.ParseLookupDeadline(f.lookupDeadline); !ok {
		return fail("--sim-lookup-deadline %q: want %s", f.lookupDeadline, strings.Join(engine.LookupDeadlines, ", "))
	}
	if f.deadSessionLoads != "fail" && f.deadSessionLoads != "timeout" {
		return fail("--sim-dead-session-loads %q: want fail or timeout", f.deadSessionLoads)
	}
	for _, d := range f.defects {
		if !slices.Contains(defectNames, d) {
			return fail("--sim-defect %q: want one of %s", d, strings.Join(defectNames, ", "))
		}
	}
	return mode, nil
}

// checkDurations: timeouts must be positive, costs and delays not negative.
func (f *serveFlags) checkDurations() error {
	type named struct {
		name string
		val  time.Duration
	}
	for _, d := range []named{
		{"--sim-lookup-timeout", f.lookupTimeout}, {"--sim-heartbeat-interval", f.heartbeatInterval},
		{"--sim-heartbeat-timeout", f.heartbeatTimeout}, {"--sim-lookup-hold", f.lookupHold},
		{"--sim-tick", f.tick}, {"--sim-freeze-gap", f.freezeGap},
		{"--sim-load-timeout", f.loadTimeout}, {"--sim-abort-ack-timeout", f.abortAckTimeout},
		{"--sim-store-timeout", f.storeTimeout},
	} {
		if d.val <= 0 {
			return exitcode.Usagef("%s %s: must be a positive duration", d.name, d.val)
		}
	}
	for _, d := range []named{{"--sim-prefill-per-token", f.prefillPerToken}, {"--sim-decode-per-token", f.decodePerToken}, {"--sim-register-per-block", f.registerPerBlock}, {"--sim-startup-delay", f.startupDelay}} {
		if d.val < 0 {
			return exitcode.Usagef("%s %s: must not be negative", d.name, d.val)
		}
	}
	return nil
}

// serveEnv is what vLLM reads from its environment.
type serveEnv struct {
	handshake     time.Duration // VLLM_P2P_HANDSHAKE_TIMEOUT_S
	statsInterval time.Duration // VLLM_LOG_STATS_INTERVAL; 0 with --disable-log-stats
	hashSeed      string        // PYTHONHASHSEED, resolved
	seedRandom    bool
}

func resolveEnv(getenv func(string) string, disableLogStats bool) (serveEnv, error) {
	var env serveEnv
	var err error
	if env.handshake, err = envSeconds(getenv, "VLLM_P2P_HANDSHAKE_TIMEOUT_S", 30*time.Second); err != nil {
		return env, err
	}
	if env.statsInterval, err = envSeconds(getenv, "VLLM_LOG_STATS_INTERVAL", 10*time.Second); err != nil {
		return env, err
	}
	if disableLogStats {
		env.statsInterval = 0
	}
	if env.hashSeed, env.seedRandom, err = hashSeed(getenv("PYTHONHASHSEED")); err != nil {
		return env, exitcode.AsUsage(err)
	}
	return env, nil
}

// kvTransfer parses --kv-transfer-config (empty: no P2P tier).
func (f *serveFlags) kvTransfer(getenv func(string) string) (kvTransfer, error) {
	kvt := kvTransfer{UnboundStoreTimeout: engine.DefaultUnboundStoreTimeout}
	if f.kvTransferConfig == "" {
		return kvt, nil
	}
	def, err := sideChannelDefaults(getenv)
	if err != nil {
		return kvt, exitcode.AsUsage(err)
	}
	kvt, err = parseKVTransferConfig(f.kvTransferConfig, def)
	if err != nil {
		return kvt, exitcode.AsUsage(err)
	}
	if kvt.P2P && !isLoopback(kvt.P2PHost) {
		return kvt, exitcode.Usagef("--kv-transfer-config: secondary_tiers p2p host %q: the sim serves on loopback only", kvt.P2PHost)
	}
	return kvt, nil
}

// build makes the configuration from checked parts; timeouts and delays are
// multiplied by --sim-time-scale, compute costs and the tick are not.
func (f *serveFlags) build(model string, mode engine.PendingMode, env serveEnv, kvt kvTransfer) serveConfig {
	blockBytes := int64(f.blockSize) * int64(f.kvBytesPerToken)
	scale := func(d time.Duration) time.Duration { return time.Duration(float64(d) * f.timeScale) }
	return serveConfig{
		Model:               model,
		Host:                f.host,
		Port:                f.port,
		MaxModelLen:         f.maxModelLen,
		PromptTokensDetails: f.promptTokensDetails,
		DPSize:              f.dpSize,
		StartupDelay:        scale(f.startupDelay),
		HashSeedRandom:      env.seedRandom,
		Engine: engine.Config{
			Model:             model,
			BlockSize:         f.blockSize,
			TPSize:            f.tpSize,
			KVBytesPerToken:   f.kvBytesPerToken,
			HashSeed:          env.hashSeed,
			GPUBlocks:         int(f.gpuMemUtil * gpuBlocksPerUtil),
			CPUBlocks:         int(min(kvt.CPUBytes/blockBytes, math.MaxInt32)),
			P2P:               kvt.P2P,
			P2PHost:           kvt.P2PHost,
			P2PPort:           kvt.P2PPort,
			PendingHandshake:  mode,
			LookupDeadline:    lookupDeadline(f.lookupDeadline),
			LoadFailure:       kvt.LoadFailure,
			DeadSessionLoads:  deadSessionLoads(f.deadSessionLoads),
			HandshakeTimeout:  scale(env.handshake),
			LookupTimeout:     scale(f.lookupTimeout),
			HeartbeatInterval: scale(f.heartbeatInterval),
			HeartbeatTimeout:  scale(f.heartbeatTimeout),
			LookupHold:        scale(f.lookupHold),
			LoadTimeout:       scale(f.loadTimeout),
			AbortAckTimeout:   scale(f.abortAckTimeout),
			StoreTimeout:      scale(f.storeTimeout),
			// unbound_store_timeout_s is vLLM's own key: scaled like the
			// --sim-* timeouts, so a compressed run keeps its proportions.
			UnboundStoreTimeout: scale(kvt.UnboundStoreTimeout),
			PrefillPerToken:     f.prefillPerToken,
			DecodePerToken:      f.decodePerToken,
			AttentionContext:    f.attentionContext,
			RegisterPerBlock:    f.registerPerBlock,
			MaxNumBatchedTokens: f.maxNumBatchedTokens,
			TransferBandwidth:   f.transferBandwidth,
			Tick:                f.tick,
			FreezeGap:           f.freezeGap,
			StaleRoute:          f.staleRoute,
			StatsInterval:       scale(env.statsInterval),
			Defects: engine.Defects{
				ReuseFreedBlocks:      slices.Contains(f.defects, "reuse-freed-blocks"),
				RecomputeKeepsPartial: slices.Contains(f.defects, "recompute-keeps-partial"),
				LeakUnboundStores:     slices.Contains(f.defects, "leak-unbound-stores"),
			},
		},
	}
}

// deadSessionLoads maps a checked --sim-dead-session-loads value.
func deadSessionLoads(v string) engine.DeadSessionLoads {
	if v == "timeout" {
		return engine.DeadLoadsTimeout
	}
	return engine.DeadLoadsFail
}

// lookupDeadline is a --sim-lookup-deadline value check has accepted.
func lookupDeadline(v string) engine.LookupDeadline {
	d, _ := engine.ParseLookupDeadline(v)
	return d
}

// envSeconds reads a vLLM environment variable holding a positive number
// of seconds; unset means def.
func envSeconds(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || !(s > 0) || math.IsInf(s, 0) {
		return 0, exitcode.Usagef("%s=%q: must be a positive number of seconds", name, v)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// hashSeed resolves PYTHONHASHSEED as Python does: unset or "random" means
// a random seed per process; otherwise an integer in [0, 4294967295].
func hashSeed(v string) (seed string, random bool, err error) {
	if v == "" || v == "random" {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", false, fmt.Errorf("PYTHONHASHSEED: draw a random seed: %w", err)
		}
		return strconv.FormatUint(uint64(binary.BigEndian.Uint32(b[:])), 10), true, nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return "", false, fmt.Errorf("PYTHONHASHSEED=%q: must be \"random\" or an integer in [0, 4294967295]", v)
	}
	return strconv.FormatUint(n, 10), false, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// getenv is os.Getenv, named for injection in tests.
func getenv(k string) string { return os.Getenv(k) }
