package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"p2pfault/runner"
)

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// vllmHelp is what a vLLM build's `serve --help=all` prints, as argparse
// lays it out, for the options p2pfault's launch passes.
var vllmOptions = []string{
	"  --data-parallel-size DATA_PARALLEL_SIZE, -dp DATA_PARALLEL_SIZE\n                        Number of data parallel groups. (default: 1)",
	"  --block-size {1,8,16,32,64,128}\n                        Size of a contiguous cache block in number of tokens. (default: None)",
	"  --enable-prompt-tokens-details, --no-enable-prompt-tokens-details\n                        If set to True, enable prompt_tokens_details in usage. (default: False)",
	"  --enforce-eager, --no-enforce-eager\n                        Whether to always use eager-mode PyTorch. (default: False)",
	"  --gpu-memory-utilization GPU_MEMORY_UTILIZATION\n                        The fraction of GPU memory, from 0 to 1, e.g. 0.5. (default: 0.9)",
	"  --host HOST           Host name. (default: None)",
	"  --kv-transfer-config KV_TRANSFER_CONFIG\n                        The configurations for distributed KV cache transfer. (default: None)",
	"  --max-model-len MAX_MODEL_LEN\n                        Model context length. (default: None)",
	"  --max-num-seqs MAX_NUM_SEQS\n                        Maximum number of sequences per iteration. (default: None)",
	"  --port PORT           Port number. (default: 8000)",
	"  --tensor-parallel-size TENSOR_PARALLEL_SIZE, -tp TENSOR_PARALLEL_SIZE\n                        Number of tensor parallel groups. (default: 1)",
	"  -O OPTIMIZATION_LEVEL, --optimization-level OPTIMIZATION_LEVEL\n                        The optimization level. (default: 2)",
	"  -h, --help            show this help message and exit",
}

// fakeVLLM writes a stand-in vllm into dir: `--version` prints version,
// `serve --help=all` the options but those in drop (a build that lacks
// them); old makes it a build from before --help=all (argparse rejects
// it, --help lists everything).
func fakeVLLM(t *testing.T, dir, version string, old bool, drop ...string) string {
	t.Helper()
	var opts []string
	for _, o := range vllmOptions {
		keep := true
		for _, d := range drop {
			if strings.HasPrefix(strings.TrimSpace(o), d+" ") || strings.HasPrefix(strings.TrimSpace(o), d+",") || strings.HasPrefix(strings.TrimSpace(o), d+"\n") {
				keep = false
			}
		}
		if keep {
			opts = append(opts, o)
		}
	}
	help := "usage: vllm serve [model_tag] [options]\n\noptions:\n" + strings.Join(opts, "\n") + "\n"
	full, plain := "--help=all", "--help"
	if old {
		full, plain = "--help", "--help=all-is-unknown"
	}
	return script(t, dir, "vllm", `case "$1 $2" in
"--version ") echo "INFO 12-01 10:00:00 [__init__.py:239] Automatically detected platform cuda."; echo '`+version+`'; exit 0 ;;
"serve `+full+`") cat <<'HELP'
`+help+`HELP
exit 0 ;;
"serve `+plain+`") echo "usage: vllm serve [model_tag] [options]" >&2; echo "vllm serve: error: argument -h/--help: ignored explicit argument 'all'" >&2; exit 2 ;;
esac
echo "vllm stand-in: $*" >&2
exit 2
`)
}

// vllmCluster plans a real vLLM cluster with runner.Plan.
func vllmCluster(t *testing.T, label string, cfg runner.Config) Cluster {
	t.Helper()
	cfg.Engine = runner.EngineVLLM
	specs, err := runner.Plan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Cluster{Label: label, Arm: label, Config: cfg, Specs: specs}
}

// only returns the results of one check.
func only(rs []Result, check string) []Result {
	var out []Result
	for _, r := range rs {
		if r.Check == check {
			out = append(out, r)
		}
	}
	return out
}

func lines(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.String() + "\n")
	}
	return b.String()
}
