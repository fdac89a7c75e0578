package doctor

import (
	"context"
	"slices"
	"strings"
	"testing"

	"p2pfault/runner"
)

func TestEnginesPassWhenServeListsEveryFlagTheRunPasses(t *testing.T) {
	bin := fakeVLLM(t, t.TempDir(), "0.11.1", false)
	c := vllmCluster(t, "main", runner.Config{VLLMBin: bin, GPUs: []string{"0", "1"}})
	rs := Engines(context.Background(), System(), []Cluster{c})
	if len(rs) != 2 || Failed(rs) != 0 {
		t.Fatalf("want 2 passing results:\n%s", lines(rs))
	}
	if want := bin + ", version 0.11.1"; rs[0].Check != "vllm" || rs[0].Found != want {
		t.Errorf("binary line %q, want check vllm found %q", rs[0], want)
	}
	// --port --host --block-size --max-model-len --gpu-memory-utilization
	// --enforce-eager --tensor-parallel-size --enable-prompt-tokens-details
	// --kv-transfer-config: the launch script's, plus prompt-token details.
	if want := bin + " serve --help=all lists all 9 options the run passes"; rs[1].Found != want {
		t.Errorf("flags line %q, want %q", rs[1].Found, want)
	}
}

func TestEnginesNameTheFlagAVLLMBuildLacks(t *testing.T) {
	bin := fakeVLLM(t, t.TempDir(), "0.9.0", false, "--kv-transfer-config", "--enable-prompt-tokens-details")
	c := vllmCluster(t, "main", runner.Config{VLLMBin: bin})
	rs := Engines(context.Background(), System(), []Cluster{c})
	flags := only(rs, "vllm serve flags")
	if len(flags) != 1 || flags[0].OK {
		t.Fatalf("want one failed flags line:\n%s", lines(rs))
	}
	want := bin + " serve --help=all does not list --enable-prompt-tokens-details, --kv-transfer-config, which the run passes"
	if flags[0].Found != want {
		t.Errorf("found %q\nwant  %q", flags[0].Found, want)
	}
	if !strings.Contains(flags[0].Fix, "run_accuracy_test.sh") || strings.Contains(flags[0].Fix, "--engine-arg") {
		t.Errorf("fix %q: want a vLLM build that runs the launch script's command line, and no word of --engine-arg (none was given)", flags[0].Fix)
	}
}

func TestEnginesBlameAnEngineArgTheBuildLacks(t *testing.T) {
	bin := fakeVLLM(t, t.TempDir(), "0.11.1", false)
	c := vllmCluster(t, "main", runner.Config{VLLMBin: bin, ExtraArgs: []string{"--max_num_seqs=8", "--kv-transfer-config.kv_role", "kv_both", "-O3", "--speculative-config", "{}"}})
	rs := only(Engines(context.Background(), System(), []Cluster{c}), "vllm serve flags")
	if len(rs) != 1 || rs[0].OK {
		t.Fatalf("want a failed flags line: %v", rs)
	}
	// --max_num_seqs is --max-num-seqs to vLLM's parser, the dotted key one
	// key of --kv-transfer-config and -O3 is -O 3: all known.
	if want := "does not list --speculative-config (from --engine-arg or the arm), which the run passes"; !strings.HasSuffix(rs[0].Found, want) {
		t.Errorf("found %q, want it to end %q", rs[0].Found, want)
	}
	if rs[0].Fix != "drop or correct the --engine-arg that passes it" {
		t.Errorf("fix %q", rs[0].Fix)
	}
}

func TestEnginesFallBackToHelpForABuildBeforeHelpAll(t *testing.T) {
	bin := fakeVLLM(t, t.TempDir(), "0.8.5", true)
	rs := Engines(context.Background(), System(), []Cluster{vllmCluster(t, "main", runner.Config{VLLMBin: bin})})
	if Failed(rs) != 0 || !strings.Contains(rs[1].Found, "serve --help lists all 9 options") {
		t.Errorf("want the flags read from plain --help:\n%s", lines(rs))
	}
}

func TestEnginesFailOnAMissingBinaryAndCheckNoFlags(t *testing.T) {
	rs := Engines(context.Background(), System(), []Cluster{vllmCluster(t, "main", runner.Config{VLLMBin: "/nonexistent/vllm"})})
	if len(rs) != 1 || rs[0].OK {
		t.Fatalf("want one failed line:\n%s", lines(rs))
	}
	if !strings.Contains(rs[0].Found, `binary "/nonexistent/vllm"`) || !strings.Contains(rs[0].Fix, "--vllm-bin PATH") {
		t.Errorf("line %q: want the path named and --vllm-bin as the fix", rs[0])
	}
}

func TestEnginesFailOnAVLLMThatDoesNotRun(t *testing.T) {
	bin := script(t, t.TempDir(), "vllm", "echo 'Traceback (most recent call last):' >&2\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")
	rs := Engines(context.Background(), System(), []Cluster{vllmCluster(t, "main", runner.Config{VLLMBin: bin})})
	if len(rs) != 1 || rs[0].OK || !strings.Contains(rs[0].Found, "ModuleNotFoundError: No module named 'torch'") {
		t.Errorf("want one failed line with Python's error:\n%s", lines(rs))
	}
}

func TestEnginesCheckEachArmsBuild(t *testing.T) {
	dir := t.TempDir()
	good := fakeVLLM(t, t.TempDir(), "0.11.1", false)
	old := fakeVLLM(t, dir, "0.7.0", false, "--kv-transfer-config")
	rs := Engines(context.Background(), System(), []Cluster{
		vllmCluster(t, "main", runner.Config{VLLMBin: good}),
		vllmCluster(t, "fixed", runner.Config{VLLMBin: old}),
	})
	var checks []string
	for _, r := range rs {
		checks = append(checks, r.String()[:len(MarkOK)]+" "+r.Check)
	}
	want := []string{"✓ vllm (arm main)", "✓ vllm serve flags (arm main)", "✓ vllm (arm fixed)", "✗ vllm serve flags (arm fixed)"}
	if !slices.Equal(checks, want) {
		t.Errorf("checks %q, want %q", checks, want)
	}
}

// fakeSim is a stand-in p2pfault whose `sim serve --help` lists pflag's
// way the simulated engine's options.
func fakeSim(t *testing.T, dir string) string {
	return script(t, dir, "p2pfault", `[ "$1 $2 $3" = "sim serve --help" ] || { echo "stand-in: $*" >&2; exit 2; }
cat <<'HELP'
Usage:
  p2pfault sim serve MODEL [flags]

Flags:
      --block-size int                    tokens per KV block (default 16)
      --enable-prompt-tokens-details      report usage.prompt_tokens_details.cached_tokens
      --enforce-eager                     accepted for compatibility; no effect
      --gpu-memory-utilization float      fraction of the (simulated) GPU, in (0, 1] (default 0.9)
  -h, --help                              help for serve
      --host string                       HTTP bind host (loopback only) (default "127.0.0.1")
      --kv-transfer-config string         OffloadingConnector JSON
      --max-model-len int                 longest prompt + completion in tokens (default 2048)
      --p2p-pending-handshake string      wait or prefill (default "wait")
      --port int                          HTTP port (0 picks a free one, logged at startup) (default 8000)
      --sim-startup-delay duration        simulated model load (default 1s)
      --sim-time-scale float              multiplies every sim timeout and delay (default 1)
      --tensor-parallel-size int          tensor-parallel size (default 1)
HELP
`)
}

func simCluster(t *testing.T, cfg runner.Config) Cluster {
	t.Helper()
	specs, err := runner.Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Cluster{Label: "main", Arm: "main", Config: cfg, Specs: specs}
}

func TestEnginesCheckTheSimulatedEnginesFlagsToo(t *testing.T) {
	self := fakeSim(t, t.TempDir())
	ok := simCluster(t, runner.Config{SelfBin: self, TimeScale: 0.5, ExtraArgs: []string{"--p2p-pending-handshake=prefill", "--sim-startup-delay=0s"}})
	rs := Engines(context.Background(), System(), []Cluster{ok})
	if Failed(rs) != 0 || rs[0].Check != "sim engine" || !strings.Contains(rs[1].Found, "sim serve --help lists all 12 options") {
		t.Errorf("want the sim and its 12 options (with --sim-time-scale) passing:\n%s", lines(rs))
	}
	typo := simCluster(t, runner.Config{SelfBin: self, ExtraArgs: []string{"--sim-startup-dely=0s"}})
	rs = only(Engines(context.Background(), System(), []Cluster{typo}), "sim serve flags")
	if len(rs) != 1 || rs[0].OK || !strings.Contains(rs[0].Found, "does not list --sim-startup-dely (from --engine-arg or the arm)") {
		t.Errorf("want the misspelt --engine-arg named: %v", rs)
	}
}

func TestHelpOptionsReadArgparseAndPflag(t *testing.T) {
	got := helpOptions([]byte(strings.Join(vllmOptions, "\n") + `
                        - "auto" will try to load the weights, e.g. --not-an-option
  --load-format {auto,pt,safetensors}
      --sim-tick duration                 scheduler step period, like --port, --host (default 5ms)
`))
	for _, o := range []string{"--block-size", "--enforce-eager", "--no-enforce-eager", "-tp", "--tensor-parallel-size", "-O", "-h", "--help", "--load-format", "--sim-tick"} {
		if !got[o] {
			t.Errorf("%s not read from the help", o)
		}
	}
	for _, o := range []string{"--not-an-option", "-", "--host,"} {
		if got[o] {
			t.Errorf("%s read from prose as an option", o)
		}
	}
}

func TestPassedFlagsSkipTheModelAndValues(t *testing.T) {
	args := []string{"sim", "serve", "meta-llama/Llama-3.2-1B-Instruct", "--port", "8100", "--kv-transfer-config", `{"kv_role":"kv_both"}`,
		"--seed", "-1", "--max_model_len=512", "--", "--after-dashes"}
	if got, want := passedFlags(args, true), []string{"--port", "--kv-transfer-config", "--seed", "--max-model-len"}; !slices.Equal(got, want) {
		t.Errorf("vllm: %q, want %q", got, want)
	}
	if got, want := passedFlags(args, false), []string{"--port", "--kv-transfer-config", "--seed", "--max_model_len"}; !slices.Equal(got, want) {
		t.Errorf("sim (pflag does not read _ as -): %q, want %q", got, want)
	}
}

// TestEnginesNameADataParallelSizeTheBuildLacks: --source-dp passes
// --data-parallel-size to every source; a vllm whose serve does not list
// it fails, with a fix that says so.
func TestEnginesNameADataParallelSizeTheBuildLacks(t *testing.T) {
	bin := fakeVLLM(t, t.TempDir(), "0.9.0", false, "--data-parallel-size")
	c := vllmCluster(t, "main", runner.Config{VLLMBin: bin, SourceDP: 2})
	flags := only(Engines(context.Background(), System(), []Cluster{c}), "vllm serve flags")
	if len(flags) != 1 || flags[0].OK || !strings.Contains(flags[0].Found, "does not list --data-parallel-size") ||
		!strings.Contains(flags[0].Fix, "drop --source-dp") {
		t.Errorf("want a failed flags line naming --data-parallel-size:\n%s", lines(flags))
	}
	bin = fakeVLLM(t, t.TempDir(), "0.11.1", false)
	c = vllmCluster(t, "main", runner.Config{VLLMBin: bin, SourceDP: 2})
	if flags := only(Engines(context.Background(), System(), []Cluster{c}), "vllm serve flags"); len(flags) != 1 || !flags[0].OK {
		t.Errorf("a build that lists it:\n%s", lines(flags))
	}
}
