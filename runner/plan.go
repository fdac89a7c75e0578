package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
)

// DecoderName is the name of a cluster's decoder when it has one.
const DecoderName = "decoder"

// Spec is how one engine is started: never through a shell.
type Spec struct {
	Name     string // "source-0", ..., "decoder" (or "decoder-0", ... of several)
	Role     event.Role
	Index    int // source index, or decoder index
	HTTPPort int
	P2PHost  string
	P2PPort  int // its P2P port; a data-parallel source's rank r listens on P2PPort+r
	// Ranks is a source's --data-parallel-size (its engine cores, each with
	// its own P2P port); 0 or 1 for an engine of one core.
	Ranks int
	Path  string   // the binary: p2pfault itself (sim) or vllm
	Args  []string // argv after the binary
	Env   []string // KEY=VALUE set on top of p2pfault's own environment

	FixedHTTP bool // the user fixed this port: taken is an error, not a reason to move
	FixedP2P  bool
}

// RankCount is the number of engine cores: Ranks, or 1.
func (s Spec) RankCount() int { return max(s.Ranks, 1) }

// SourcesOf is how many sources specs start and each one's count of
// data-parallel ranks, by index (for the openers that start the engines
// runner.Plan describes: experiment.PlanRanks makes it a Plan's Ranks).
func SourcesOf(specs []Spec) (sources int, ranks []int) {
	for _, s := range specs {
		if s.Role == event.RoleSource {
			ranks = append(ranks, s.RankCount())
		}
	}
	return len(ranks), ranks
}

// DecodersOf is how many decoders specs start.
func DecodersOf(specs []Spec) int {
	n := 0
	for _, s := range specs {
		if s.Role == event.RoleDecoder {
			n++
		}
	}
	return n
}

// P2PPorts are the engine's P2P ports, rank 0 first.
func (s Spec) P2PPorts() []int { return portRun(s.P2PPort, s.RankCount()) }

func portRun(first, n int) []int {
	out := make([]int, n)
	for r := range out {
		out[r] = first + r
	}
	return out
}

// Argv is the full argument vector, binary first.
func (s Spec) Argv() []string { return append([]string{s.Path}, s.Args...) }

// CommandLine renders the spec as a shell command (env, then argv), for logs
// and for people who want to run one engine by hand.
func (s Spec) CommandLine() string {
	var b strings.Builder
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		b.WriteString(k + "=" + shellQuote(v) + " ")
	}
	for i, a := range s.Argv() {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// kvTransferConfig is reference §1's --kv-transfer-config; a struct rather
// than a map so the JSON's key order is the script's and stable.
type kvTransferConfig struct {
	KVConnector string        `json:"kv_connector"`
	KVRole      string        `json:"kv_role"`
	Extra       kvExtraConfig `json:"kv_connector_extra_config"`
	// LoadFailurePolicy is vLLM's kv_load_failure_policy (#34896): "fail"
	// (vLLM's default) errors a request whose KV load failed, "recompute"
	// prefills it locally. Omitted when empty.
	LoadFailurePolicy string `json:"kv_load_failure_policy,omitempty"`
}

type kvExtraConfig struct {
	SpecName       string    `json:"spec_name"`
	CPUBytesToUse  int       `json:"cpu_bytes_to_use"`
	SecondaryTiers []p2pTier `json:"secondary_tiers"`
}

type p2pTier struct {
	Type string `json:"type"`
	Host string `json:"host"`
	Port int    `json:"port"`
	// UnboundStoreS is the tier's unbound_store_timeout_s (#53453), in
	// seconds; omitted for the engine's default.
	UnboundStoreS float64 `json:"unbound_store_timeout_s,omitempty"`
}

func kvTransferJSON(host string, port int, policy string, unbound time.Duration) string {
	// Marshalling a struct of strings and ints cannot fail.
	b, _ := json.Marshal(kvTransferConfig{
		KVConnector: "OffloadingConnector",
		KVRole:      "kv_both",
		Extra: kvExtraConfig{
			SpecName:       "TieringOffloadingSpec",
			CPUBytesToUse:  DefaultCPUBytes,
			SecondaryTiers: []p2pTier{{Type: "p2p", Host: host, Port: port, UnboundStoreS: unbound.Seconds()}},
		},
		LoadFailurePolicy: policy,
	})
	return string(b)
}

// portPlan is one engine's ports before they are checked.
type portPlan struct {
	http, p2p           int
	ranks               int // the P2P ports are p2p..p2p+ranks-1 (0: one)
	fixedHTTP, fixedP2P bool
}

func (p portPlan) rankCount() int  { return max(p.ranks, 1) }
func (p portPlan) p2pPorts() []int { return portRun(p.p2p, p.rankCount()) }

// planPorts gives each engine (sources, then the decoders) its ports from
// the bases, as run_accuracy_test.sh does; a data-parallel source takes
// one P2P port per rank, consecutive (vLLM #47636 binds rank r at base+r);
// decoder d takes the decoder HTTP base + d and the P2P port after the
// sources' + d.
func planPorts(cfg Config) ([]portPlan, error) {
	base := func(p, def int) (int, bool) {
		if p == 0 {
			return def, false
		}
		return p, true
	}
	srcHTTP, fixedSrc := base(cfg.Ports.SourceHTTP, DefaultSourceHTTPPort)
	decHTTP, fixedDec := base(cfg.Ports.DecoderHTTP, DefaultDecoderHTTPPort)
	p2p, fixedP2P := base(cfg.Ports.P2P, DefaultP2PPort)
	plans := make([]portPlan, 0, cfg.Sources+cfg.Decoders)
	ranks := max(cfg.SourceDP, 1)
	for i := 0; i < cfg.Sources; i++ {
		plans = append(plans, portPlan{http: srcHTTP + i, p2p: p2p + i*ranks, ranks: cfg.SourceDP, fixedHTTP: fixedSrc, fixedP2P: fixedP2P})
	}
	for d := 0; d < cfg.Decoders; d++ {
		plans = append(plans, portPlan{http: decHTTP + d, p2p: p2p + cfg.Sources*ranks + d, fixedHTTP: fixedDec, fixedP2P: fixedP2P})
	}
	return plans, checkPortPlans(cfg.Sources, plans)
}

// checkPortPlans rejects ports out of range and ports given twice.
func checkPortPlans(sources int, plans []portPlan) error {
	owner := map[int]string{}
	for i, p := range plans {
		name := engineName(sources, plans, i)
		uses := []struct {
			what string
			port int
		}{{name + " HTTP", p.http}}
		for r, q := range p.p2pPorts() {
			what := name + " P2P"
			if p.ranks > 1 {
				what = event.RankName(i, r) + " P2P"
			}
			uses = append(uses, struct {
				what string
				port int
			}{what, q})
		}
		for _, use := range uses {
			if use.port < 1 || use.port > 65535 {
				return exitcode.Usagef("port %d for %s: want 1-65535", use.port, use.what)
			}
			if prev, dup := owner[use.port]; dup {
				return exitcode.Usagef("port %d is given to both %s and %s", use.port, prev, use.what)
			}
			owner[use.port] = use.what
		}
	}
	return nil
}

// engineName is engine i's name among plans of sources then decoders.
func engineName(sources int, plans []portPlan, i int) string {
	if i < sources {
		return event.SourceName(i)
	}
	return event.DecoderName(i-sources, len(plans)-sources)
}

// Plan returns how each engine of cfg would be started (sources first, then
// the decoders) with the planned ports, without starting or binding
// anything. Start uses the same specs, except that an unfixed port that is
// taken (every unfixed port with FreePorts) is replaced by a free one.
func Plan(cfg Config) ([]Spec, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ports, err := planPorts(cfg)
	if err != nil {
		return nil, err
	}
	return buildSpecs(cfg, ports)
}

// buildSpecs renders every engine's argv and environment from one template,
// so the simulated engine is started exactly as vllm serve would be.
func buildSpecs(cfg Config, ports []portPlan) ([]Spec, error) {
	path := cfg.VLLMBin
	prefix := []string{}
	if cfg.Engine == EngineSim {
		path = cfg.SelfBin
		if path == "" {
			self, err := os.Executable()
			if err != nil {
				return nil, fmt.Errorf("find p2pfault's own binary for the simulated engine: %w", err)
			}
			path = self
		}
		prefix = []string{"sim"}
	}
	specs := make([]Spec, 0, len(ports))
	for i, p := range ports {
		s := Spec{
			Name:      engineName(cfg.Sources, ports, i),
			Role:      event.RoleSource,
			Index:     i,
			HTTPPort:  p.http,
			P2PHost:   Host,
			P2PPort:   p.p2p,
			Ranks:     p.ranks,
			Path:      path,
			FixedHTTP: p.fixedHTTP,
			FixedP2P:  p.fixedP2P,
		}
		if i >= cfg.Sources {
			s.Role, s.Index = event.RoleDecoder, i-cfg.Sources
		}
		s.Args = append(append([]string{}, prefix...),
			"serve", cfg.Model,
			"--port", strconv.Itoa(p.http),
			"--host", Host,
			"--block-size", "128",
			"--max-model-len", strconv.Itoa(MaxModelLen),
			"--gpu-memory-utilization", "0.45",
			"--enforce-eager",
			"--tensor-parallel-size", "1",
			"--enable-prompt-tokens-details",
			"--kv-transfer-config", kvTransferJSON(Host, p.p2p, cfg.LoadFailurePolicy, cfg.UnboundStoreTimeout),
		)
		if s.Ranks > 1 {
			s.Args = append(s.Args, "--data-parallel-size", strconv.Itoa(s.Ranks))
		}
		if cfg.Engine == EngineSim && cfg.TimeScale != event.DefaultTimeScale {
			s.Args = append(s.Args, "--sim-time-scale", strconv.FormatFloat(cfg.TimeScale, 'g', -1, 64))
		}
		s.Args = append(s.Args, cfg.ExtraArgs...)
		if s.Role == event.RoleSource {
			s.Args = append(s.Args, cfg.SourceArgs...)
		} else {
			s.Args = append(s.Args, cfg.DecoderArgs...)
		}
		if cfg.Engine == EngineVLLM && len(cfg.GPUs) > 0 {
			s.Env = append(s.Env, "CUDA_VISIBLE_DEVICES="+cfg.GPUs[i%len(cfg.GPUs)])
		}
		s.Env = append(s.Env, "PYTHONHASHSEED="+cfg.HashSeed)
		if cfg.Engine == EngineVLLM && s.Ranks > 1 {
			// vLLM #47636: each DP replica's P2P manager binds
			// VLLM_P2P_SIDE_CHANNEL_HOST at VLLM_P2P_SIDE_CHANNEL_PORT +
			// data_parallel_index (defaults localhost, 5710).
			s.Env = append(s.Env, "VLLM_P2P_SIDE_CHANNEL_HOST="+Host, "VLLM_P2P_SIDE_CHANNEL_PORT="+strconv.Itoa(p.p2p))
		}
		if cfg.HandshakeTimeout > 0 {
			s.Env = append(s.Env, "VLLM_P2P_HANDSHAKE_TIMEOUT_S="+formatSeconds(cfg.HandshakeTimeout))
		}
		s.Env = append(s.Env, cfg.Env...)
		specs = append(specs, s)
	}
	return specs, nil
}

// SpecAt is engine i's spec (sources by index, then the decoders) from the
// one template, on the given HTTP and P2P ports instead of its planned
// ones: how an engine is started in its own place on new ports by a
// cluster that does not start processes (a virtual cluster's replace).
func SpecAt(cfg Config, i, httpPort, p2pPort int) (Spec, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Spec{}, err
	}
	ports, err := planPorts(cfg)
	if err != nil {
		return Spec{}, err
	}
	if i < 0 || i >= len(ports) {
		return Spec{}, fmt.Errorf("no engine #%d: the cluster has %d", i, len(ports))
	}
	ports[i] = portPlan{http: httpPort, p2p: p2pPort, ranks: ports[i].ranks}
	if err := checkPortPlans(cfg.Sources, ports); err != nil {
		return Spec{}, err
	}
	specs, err := buildSpecs(cfg, ports)
	if err != nil {
		return Spec{}, err
	}
	return specs[i], nil
}
