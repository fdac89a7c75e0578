package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"p2pfault/exitcode"
	"p2pfault/sim/engine"
)

func resolveArgs(t *testing.T, env map[string]string, args ...string) (serveConfig, error) {
	t.Helper()
	var f serveFlags
	fs := newServeFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return f.resolve("m", func(k string) string { return env[k] })
}

func newServeFlagSet(f *serveFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	return fs
}

func TestResolveServeConfig(t *testing.T) {
	launch := `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":209715200,"secondary_tiers":[{"type":"p2p","host":"127.0.0.1","port":7777}]}}`
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		check func(c serveConfig) string
	}{
		{"the launch script's flags: 50 CPU blocks, P2P on 127.0.0.1:7777, vLLM's timeouts", map[string]string{"PYTHONHASHSEED": "42"},
			[]string{"--port", "8100", "--block-size", "128", "--max-model-len", "512", "--gpu-memory-utilization", "0.45",
				"--enforce-eager", "--tensor-parallel-size", "1", "--enable-prompt-tokens-details", "--kv-transfer-config", launch},
			func(c serveConfig) string {
				e := c.Engine
				switch {
				case c.Port != 8100 || c.MaxModelLen != 512 || !c.PromptTokensDetails:
					return "HTTP settings"
				case e.CPUBlocks != 50: // 209715200 / (128 × 32768)
					return "CPU blocks"
				case !e.P2P || e.P2PHost != "127.0.0.1" || e.P2PPort != 7777:
					return "P2P tier"
				case e.HashSeed != "42" || c.HashSeedRandom:
					return "hash seed"
				case e.HandshakeTimeout != 30*time.Second || e.LookupTimeout != 8*time.Second || e.HeartbeatTimeout != 10*time.Second:
					return "timeouts"
				case e.PendingHandshake != engine.PendingWait || e.LoadFailure != engine.PolicyFail:
					return "modes"
				case e.StatsInterval != 10*time.Second:
					return "stats interval (vLLM's VLLM_LOG_STATS_INTERVAL default)"
				case time.Duration(384)*e.PrefillPerToken < 9*time.Millisecond || time.Duration(384)*e.PrefillPerToken > 11*time.Millisecond:
					return "a 384-token prefill should cost about 10 ms"
				case e.MaxNumBatchedTokens != 2048:
					return "token budget (vLLM's API-server default, 2048)"
				}
				return ""
			}},
		{"the time scale multiplies timeouts and delays but not the tick or costs", map[string]string{"PYTHONHASHSEED": "1", "VLLM_P2P_HANDSHAKE_TIMEOUT_S": "20", "VLLM_LOG_STATS_INTERVAL": "5"},
			[]string{"--sim-time-scale", "0.1", "--kv-transfer-config", launch, "--sim-startup-delay", "2s"},
			func(c serveConfig) string {
				e := c.Engine
				switch {
				case e.HandshakeTimeout != 2*time.Second || e.LookupTimeout != 800*time.Millisecond:
					return "handshake/lookup"
				case e.HeartbeatInterval != 200*time.Millisecond || e.HeartbeatTimeout != time.Second || e.LookupHold != 500*time.Millisecond:
					return "heartbeat/hold"
				case e.LoadTimeout != 3*time.Second || e.AbortAckTimeout != time.Second || c.StartupDelay != 200*time.Millisecond:
					return "load/abort/startup"
				case e.StatsInterval != 500*time.Millisecond:
					return "stats interval"
				case e.Tick != 5*time.Millisecond || e.PrefillPerToken != 26*time.Microsecond || e.FreezeGap != 500*time.Millisecond:
					return "unscaled knobs"
				}
				return ""
			}},
		{"no kv-transfer-config: no CPU tier, no P2P", map[string]string{"PYTHONHASHSEED": "0"}, nil,
			func(c serveConfig) string {
				if c.Engine.P2P || c.Engine.CPUBlocks != 0 {
					return "tiers"
				}
				return ""
			}},
		{"a p2p tier without host or port takes vLLM's defaults; recompute policy in the extra config", map[string]string{"PYTHONHASHSEED": "0"},
			[]string{"--p2p-pending-handshake=prefill", "--kv-transfer-config", `{"kv_connector":"OffloadingConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":2e8,"kv_load_failure_policy":"recompute","secondary_tiers":[{"type":"p2p"}]}}`},
			func(c serveConfig) string {
				e := c.Engine
				if e.P2PHost != "localhost" || e.P2PPort != 5710 || e.LoadFailure != engine.PolicyRecompute || e.PendingHandshake != engine.PendingPrefill {
					return "defaults"
				}
				return ""
			}},
		{"a p2p tier without host or port takes VLLM_P2P_SIDE_CHANNEL_HOST/_PORT; rank r binds base + r", map[string]string{"PYTHONHASHSEED": "0", "VLLM_P2P_SIDE_CHANNEL_HOST": "127.0.0.1", "VLLM_P2P_SIDE_CHANNEL_PORT": "7777"},
			[]string{"--data-parallel-size", "3", "--kv-transfer-config", `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":2e8,"secondary_tiers":[{"type":"p2p"}]}}`},
			func(c serveConfig) string {
				if c.DPSize != 3 || c.rankEngine(0).P2PPort != 7777 || c.rankEngine(2).P2PPort != 7779 || c.rankEngine(2).P2PHost != "127.0.0.1" {
					return "side-channel defaults or rank ports"
				}
				return ""
			}},
		{"the tier's own port wins over VLLM_P2P_SIDE_CHANNEL_PORT; DP 1 keeps the base", map[string]string{"PYTHONHASHSEED": "0", "VLLM_P2P_SIDE_CHANNEL_PORT": "9000"},
			[]string{"--kv-transfer-config", launch},
			func(c serveConfig) string {
				if c.DPSize != 1 || c.rankEngine(0).P2PPort != 7777 {
					return "explicit port"
				}
				return ""
			}},
		{"dead sessions' loads fail by default; --sim-dead-session-loads timeout keeps them", map[string]string{"PYTHONHASHSEED": "0"}, []string{"--sim-dead-session-loads", "timeout"},
			func(c serveConfig) string {
				if c.Engine.DeadSessionLoads != engine.DeadLoadsTimeout {
					return "dead-session loads"
				}
				if d, _ := resolveArgs(t, map[string]string{"PYTHONHASHSEED": "0"}); d.Engine.DeadSessionLoads != engine.DeadLoadsFail {
					return "default dead-session loads"
				}
				return ""
			}},
		{"the lookup deadline is the seed's build's by default; --sim-lookup-deadline selects another", map[string]string{"PYTHONHASHSEED": "0"}, []string{"--sim-lookup-deadline", "progress", "--sim-lookup-timeout", "30s"},
			func(c serveConfig) string {
				if c.Engine.LookupDeadline != engine.LookupProgress || c.Engine.LookupTimeout != 30*time.Second {
					return "lookup deadline"
				}
				if d, _ := resolveArgs(t, map[string]string{"PYTHONHASHSEED": "0"}); d.Engine.LookupDeadline != engine.LookupSilence || d.Engine.LookupTimeout != 8*time.Second {
					return "default lookup deadline"
				}
				return ""
			}},
		{"--disable-log-stats turns the stats line off", map[string]string{"PYTHONHASHSEED": "0", "VLLM_LOG_STATS_INTERVAL": "3"}, []string{"--disable-log-stats"},
			func(c serveConfig) string {
				if c.Engine.StatsInterval != 0 {
					return "stats interval"
				}
				return ""
			}},
		{"unset PYTHONHASHSEED draws a random seed", nil, nil,
			func(c serveConfig) string {
				if !c.HashSeedRandom || c.Engine.HashSeed == "" {
					return "random seed"
				}
				return ""
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := resolveArgs(t, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if what := tt.check(c); what != "" {
				t.Errorf("wrong %s: %+v", what, c)
			}
		})
	}
}

func TestResolveErrorsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"--sim-freeze-gap", "0s"}, {"--max-num-batched-tokens", "0"}, {"--sim-dead-session-loads", "keep"}, {"--sim-lookup-deadline", "forever"}, {"--sim-attention-context", "-1"}, {"--sim-register-per-block", "-1us"}} {
		_, err := resolveArgs(t, nil, args...)
		if exitcode.Code(err) != exitcode.Usage || !strings.Contains(fmt.Sprint(err), args[0]) {
			t.Errorf("%v: exit code %d for %v, want %d naming %s", args, exitcode.Code(err), err, exitcode.Usage, args[0])
		}
	}
}

// TestTimeoutFlagsAreDurationFlagsOfServe: every name a slice may sweep
// on the simulated engine is a duration flag of `sim serve` (so a sweep
// value reaches a timeout, not an unknown flag).
func TestTimeoutFlagsAreDurationFlagsOfServe(t *testing.T) {
	var f serveFlags
	fs := newServeFlagSet(&f)
	for _, name := range TimeoutFlags() {
		fl := fs.Lookup(name)
		if fl == nil {
			t.Errorf("%s: not a flag of sim serve", name)
			continue
		}
		if fl.Value.Type() != "duration" {
			t.Errorf("%s: a %s flag, want a duration", name, fl.Value.Type())
		}
	}
}

// TestDataParallelErrorsNameTheBadThing: a bad rank count, side-channel
// port or a rank port past 65535 is a usage error naming it.
func TestDataParallelErrorsNameTheBadThing(t *testing.T) {
	tier := func(port string) string {
		return `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":2e8,"secondary_tiers":[{"type":"p2p"` + port + `}]}}`
	}
	for _, tt := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--data-parallel-size", "0"}, "--data-parallel-size 0"},
		{map[string]string{"VLLM_P2P_SIDE_CHANNEL_PORT": "x"}, []string{"--kv-transfer-config", tier("")}, `VLLM_P2P_SIDE_CHANNEL_PORT="x"`},
		{map[string]string{"VLLM_P2P_SIDE_CHANNEL_PORT": "70000"}, []string{"--kv-transfer-config", tier("")}, `VLLM_P2P_SIDE_CHANNEL_PORT="70000"`},
		{nil, []string{"--data-parallel-size", "3", "--kv-transfer-config", tier(`,"port":65534`)}, "--data-parallel-size 3: the P2P ports 65534..65536"},
	} {
		_, err := resolveArgs(t, tt.env, tt.args...)
		if exitcode.Code(err) != exitcode.Usage || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v %v: got %v (exit code %d), want a usage error naming %q", tt.env, tt.args, err, exitcode.Code(err), tt.want)
		}
	}
}
