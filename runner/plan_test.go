package runner_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/runner"
)

// vllmTwoSources is the launch of the seed's slice: 2 sources + decoder,
// GPUs from the script's round-robin.
func vllmTwoSources() runner.Config {
	return runner.Config{Engine: runner.EngineVLLM, Sources: 2, GPUs: []string{"0", "1"}}
}

// TestPlanVLLMTwoSourcesAndDecoderMatchesGolden pins the `vllm serve`
// command lines and environments (reference §1); `go test -update`
// rewrites testdata/*.golden.
func TestPlanVLLMTwoSourcesAndDecoderMatchesGolden(t *testing.T) {
	specs, err := runner.Plan(vllmTwoSources())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range specs {
		fmt.Fprintf(&b, "# %s: HTTP %d, P2P %s:%d\n%s\n", s.Name, s.HTTPPort, s.P2PHost, s.P2PPort, s.CommandLine())
	}
	golden.RequireEqual(t, b.String())
}

// TestPlanVLLMFollowsRunAccuracyTest checks, field by field, what the golden
// file shows against run_accuracy_test.sh (reference §1).
func TestPlanVLLMFollowsRunAccuracyTest(t *testing.T) {
	specs, err := runner.Plan(vllmTwoSources())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		role event.Role
		http int
		p2p  int
		gpu  string
	}{
		{"source-0", event.RoleSource, 8100, 7777, "0"},
		{"source-1", event.RoleSource, 8101, 7778, "1"},
		{"decoder", event.RoleDecoder, 8200, 7779, "0"}, // P2P after the sources; GPUs round-robin
	}
	if len(specs) != len(want) {
		t.Fatalf("got %d specs, want %d", len(specs), len(want))
	}
	for i, w := range want {
		s := specs[i]
		t.Run(w.name, func(t *testing.T) {
			if s.Name != w.name || s.Role != w.role || s.HTTPPort != w.http || s.P2PPort != w.p2p || s.P2PHost != "127.0.0.1" {
				t.Errorf("got %s %s HTTP %d P2P %s:%d, want %s %s HTTP %d P2P 127.0.0.1:%d",
					s.Name, s.Role, s.HTTPPort, s.P2PHost, s.P2PPort, w.name, w.role, w.http, w.p2p)
			}
			if s.Path != "vllm" || s.Args[0] != "serve" || s.Args[1] != runner.DefaultModel {
				t.Errorf("argv starts %q, want vllm serve %s", s.Argv()[:3], runner.DefaultModel)
			}
			for _, kv := range []string{"CUDA_VISIBLE_DEVICES=" + w.gpu, "PYTHONHASHSEED=42"} {
				if !slices.Contains(s.Env, kv) {
					t.Errorf("env %q lacks %s", s.Env, kv)
				}
			}
			for flag, value := range map[string]string{
				"--port": fmt.Sprint(w.http), "--block-size": "128", "--max-model-len": "512",
				"--gpu-memory-utilization": "0.45", "--tensor-parallel-size": "1",
			} {
				if got := argValue(s.Args, flag); got != value {
					t.Errorf("%s = %q, want %q", flag, got, value)
				}
			}
			for _, flag := range []string{"--enforce-eager", "--enable-prompt-tokens-details"} {
				if !slices.Contains(s.Args, flag) {
					t.Errorf("argv lacks %s", flag)
				}
			}
			var kv struct {
				Connector string `json:"kv_connector"`
				Role      string `json:"kv_role"`
				Extra     struct {
					Spec  string `json:"spec_name"`
					CPU   int    `json:"cpu_bytes_to_use"`
					Tiers []struct {
						Type, Host string
						Port       int
					} `json:"secondary_tiers"`
				} `json:"kv_connector_extra_config"`
			}
			if err := json.Unmarshal([]byte(argValue(s.Args, "--kv-transfer-config")), &kv); err != nil {
				t.Fatalf("kv-transfer-config: %v", err)
			}
			if kv.Connector != "OffloadingConnector" || kv.Role != "kv_both" || kv.Extra.Spec != "TieringOffloadingSpec" ||
				kv.Extra.CPU != 209715200 || len(kv.Extra.Tiers) != 1 || kv.Extra.Tiers[0].Type != "p2p" ||
				kv.Extra.Tiers[0].Host != "127.0.0.1" || kv.Extra.Tiers[0].Port != w.p2p {
				t.Errorf("kv-transfer-config = %+v", kv)
			}
		})
	}
}

func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// TestPlanSimRunsTheVLLMCommandLine: the simulated engine gets exactly the
// vllm argv after `p2pfault sim`, plus only --sim-* flags.
func TestPlanSimRunsTheVLLMCommandLine(t *testing.T) {
	base := runner.Config{Sources: 3, TimeScale: 0.1, HandshakeTimeout: 3 * time.Second,
		ExtraArgs: []string{"--p2p-pending-handshake=prefill"}, DecoderArgs: []string{"--seed", "7"}}
	simCfg, vllmCfg := base, base
	simCfg.Engine, simCfg.SelfBin = runner.EngineSim, "/bin/p2pfault"
	vllmCfg.Engine = runner.EngineVLLM
	sims, err := runner.Plan(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	vllms, err := runner.Plan(vllmCfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sims {
		s, v := sims[i], vllms[i]
		if s.Path != "/bin/p2pfault" || s.Args[0] != "sim" {
			t.Errorf("%s: sim argv starts %q", s.Name, s.Argv()[:2])
		}
		var stripped []string
		for j := 1; j < len(s.Args); j++ {
			if strings.HasPrefix(s.Args[j], "--sim-") {
				j++ // and its value
				continue
			}
			stripped = append(stripped, s.Args[j])
		}
		if !slices.Equal(stripped, v.Args) {
			t.Errorf("%s: sim argv minus --sim-* = %q, vllm argv = %q", s.Name, stripped, v.Args)
		}
		if argValue(s.Args, "--sim-time-scale") != "0.1" {
			t.Errorf("%s: --sim-time-scale = %q, want 0.1", s.Name, argValue(s.Args, "--sim-time-scale"))
		}
		if !slices.Equal(s.Env, v.Env) || !slices.Contains(s.Env, "VLLM_P2P_HANDSHAKE_TIMEOUT_S=3") {
			t.Errorf("%s: sim env %q, vllm env %q, want equal with VLLM_P2P_HANDSHAKE_TIMEOUT_S=3", s.Name, s.Env, v.Env)
		}
	}
	if got := argValue(sims[3].Args, "--seed"); got != "7" {
		t.Errorf("decoder --seed = %q, want 7 (DecoderArgs)", got)
	}
	if slices.Contains(sims[0].Args, "--seed") {
		t.Errorf("source-0 got the decoder's args: %q", sims[0].Args)
	}
}

func TestPlanFixedBasesMoveEveryPort(t *testing.T) {
	specs, err := runner.Plan(runner.Config{Sources: 2, SelfBin: "p", Ports: runner.Ports{SourceHTTP: 9100, DecoderHTTP: 9200, P2P: 9300}})
	if err != nil {
		t.Fatal(err)
	}
	got := [][2]int{}
	for _, s := range specs {
		got = append(got, [2]int{s.HTTPPort, s.P2PPort})
		if !s.FixedHTTP || !s.FixedP2P {
			t.Errorf("%s: ports not marked fixed", s.Name)
		}
	}
	want := [][2]int{{9100, 9300}, {9101, 9301}, {9200, 9302}}
	if !slices.Equal(got, want) {
		t.Errorf("ports %v, want %v", got, want)
	}
}

func TestPlanRejectsBadConfigNamingIt(t *testing.T) {
	tests := []struct {
		name string
		cfg  runner.Config
		want string
	}{
		{"unknown engine", runner.Config{Engine: "tgi"}, `engine "tgi"`},
		{"port out of range", runner.Config{Ports: runner.Ports{P2P: 70000}}, "P2P port 70000"},
		{"ports overlap", runner.Config{Sources: 3, Ports: runner.Ports{SourceHTTP: 9000, DecoderHTTP: 9002}}, "port 9002 is given to both source-2 HTTP and decoder HTTP"},
		{"base pushes past 65535", runner.Config{Ports: runner.Ports{SourceHTTP: 65535}}, "port 65536 for source-1 HTTP"},
		{"sim flag for vllm", runner.Config{Engine: runner.EngineVLLM, ExtraArgs: []string{"--sim-tick=1ms"}}, `"--sim-tick=1ms" is for the simulated engine only`},
		{"bad GPU", runner.Config{Engine: runner.EngineVLLM, GPUs: []string{"0,1"}}, `GPU 0 "0,1"`},
		{"bad env", runner.Config{Env: []string{"NOEQUALS"}}, `environment entry "NOEQUALS"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.SelfBin = "p2pfault"
			_, err := runner.Plan(tt.cfg)
			if err == nil {
				t.Fatalf("Plan accepted %+v", tt.cfg)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
			if code := exitcode.Code(err); code != exitcode.Usage {
				t.Errorf("exit code %d, want %d", code, exitcode.Usage)
			}
		})
	}
}

// TestPlanPutsTheLoadFailurePolicyInTheKVTransferConfig: the policy goes
// into every engine's --kv-transfer-config at the top level, as vLLM reads
// it; empty leaves vLLM's default (the key is absent). (The command line
// refuses any other value: cli's TestBadInputIsAUsageErrorThatNamesIt.)
func TestPlanPutsTheLoadFailurePolicyInTheKVTransferConfig(t *testing.T) {
	for _, policy := range []string{"", "fail", "recompute"} {
		cfg := vllmTwoSources()
		cfg.LoadFailurePolicy = policy
		specs, err := runner.Plan(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			i := slices.Index(s.Args, "--kv-transfer-config")
			var kv map[string]any
			if err := json.Unmarshal([]byte(s.Args[i+1]), &kv); err != nil {
				t.Fatal(err)
			}
			got, present := kv["kv_load_failure_policy"]
			if policy == "" && present {
				t.Errorf("%s: policy %q in %s, want the key absent", s.Name, got, s.Args[i+1])
			}
			if policy != "" && got != policy {
				t.Errorf("%s: kv_load_failure_policy %v, want %q", s.Name, got, policy)
			}
		}
	}
}

// TestPlanSeveralDecoders: --decoders 3 starts three decoders after the
// sources, named decoder-0..2 and indexed so, each on the decoder HTTP
// base + d and the P2P port after the sources' + d; one decoder keeps
// its name "decoder"; too many is a usage error naming the flag's limit.
func TestPlanSeveralDecoders(t *testing.T) {
	specs, err := runner.Plan(runner.Config{Sources: 2, Decoders: 3, SelfBin: "p", Ports: runner.Ports{SourceHTTP: 9100, DecoderHTTP: 9200, P2P: 9300}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range specs {
		got = append(got, fmt.Sprintf("%s %s #%d %d %d", s.Name, s.Role, s.Index, s.HTTPPort, s.P2PPort))
	}
	want := []string{"source-0 source #0 9100 9300", "source-1 source #1 9101 9301",
		"decoder-0 decoder #0 9200 9302", "decoder-1 decoder #1 9201 9303", "decoder-2 decoder #2 9202 9304"}
	if !slices.Equal(got, want) {
		t.Errorf("specs\n%q\nwant\n%q", got, want)
	}
	if n := runner.DecodersOf(specs); n != 3 {
		t.Errorf("DecodersOf %d, want 3", n)
	}
	one, err := runner.Plan(runner.Config{SelfBin: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if name := one[len(one)-1].Name; name != runner.DecoderName {
		t.Errorf("the one decoder is %q, want %q", name, runner.DecoderName)
	}
	_, err = runner.Plan(runner.Config{SelfBin: "p", Decoders: runner.MaxDecoders + 1})
	if err == nil || !strings.Contains(err.Error(), "decoders 17: want 1-16") {
		t.Errorf("17 decoders: %v", err)
	}
}
