package cli_test

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"p2pfault/cli"
)

// TestBadInputIsAUsageErrorThatNamesIt: every bad flag, value, argument or
// environment knob ends with exit 2 and a message naming the bad thing,
// before any engine starts and before the output folder is made.
func TestBadInputIsAUsageErrorThatNamesIt(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"run", "--bogus"}, nil, "unknown flag: --bogus"},
		{"unknown flag on bare p2pfault", []string{"--bogus"}, nil, "unknown flag: --bogus"},
		{"bad case", []string{"run", "--headless", "--case", "explode"}, nil, `--case "explode"`},
		{"bad FAULT_CASE", []string{"run", "--headless"}, map[string]string{"FAULT_CASE": "melt"}, `FAULT_CASE "melt"`},
		{"bad NUM_PREFILL_INSTANCES", []string{"run", "--headless"}, map[string]string{"NUM_PREFILL_INSTANCES": "two"}, `NUM_PREFILL_INSTANCES="two"`},
		{"negative time scale", []string{"run", "--headless", "--time-scale", "-1"}, nil, "--time-scale -1"},
		{"time scale not a number", []string{"run", "--time-scale", "fast"}, nil, `"fast"`},
		{"zero interval", []string{"run", "--headless", "--interval", "0s"}, nil, "--interval 0s"},
		{"time scale not finite", []string{"run", "--headless", "--time-scale", "Inf"}, nil, "--time-scale +Inf"},
		{"negative restart length", []string{"run", "--headless", "--restart-length", "-1s"}, nil, "--restart-length -1s"},
		{"negative handshake timeout", []string{"run", "--headless", "--handshake-timeout", "-1s"}, nil, "--handshake-timeout -1s"},
		{"negative duration", []string{"run", "--headless", "--duration", "-1s"}, nil, "--duration -1s"},
		{"zero bound", []string{"run", "--headless", "--bound-faulted-max", "0s"}, nil, "--bound-faulted-max 0s"},
		{"bad duration", []string{"run", "--stall-for", "30x"}, nil, `"30x"`},
		{"hit rate over 1", []string{"run", "--headless", "--bound-healthy-hit-rate", "1.5"}, nil, "bound-healthy-hit-rate 1.5"},
		{"bad arm", []string{"run", "--headless", "--arm", "broken"}, nil, `arm "broken"`},
		{"bad arm among arms", []string{"run", "--headless", "--arms", "main,broken"}, nil, `arm "broken"`},
		{"arm and arms", []string{"run", "--headless", "--arm", "main", "--arms", "main,fixed"}, nil, "--arm and --arms both given"},
		{"arm given twice", []string{"run", "--headless", "--arms", "main,main"}, nil, `arm "main" given twice`},
		{"sim arm NAME=PATH", []string{"run", "--headless", "--arm", "main=/bin/true"}, nil, `--arm "main=/bin/true": NAME=VLLM_BIN is for --engine vllm`},
		{"vllm arms list", []string{"run", "--headless", "--engine", "vllm", "--arms", "a,b"}, nil, "--arms names the simulated engine's arms"},
		{"vllm arm without a path", []string{"run", "--headless", "--engine", "vllm", "--arm", "main="}, nil, `--arm "main=": want NAME=VLLM_BIN`},
		{"fixed port with two arms", []string{"run", "--headless", "--arms", "main,fixed", "--decoder-port", "9200"}, nil, "--decoder-port fixes one cluster's ports, and 2 arms"},
		{"fewer GPUs than arms", []string{"run", "--headless", "--engine", "vllm", "--arm", "a=/x/vllm", "--arm", "b=/y/vllm", "--gpus", "0"}, nil, "--gpus 0: 1 GPU(s) for 2 arms"},
		{"FAULTS=1 with --arms", []string{"--arms", "main"}, map[string]string{"FAULTS": "1"}, "FAULTS=1 runs the slice of arms main,fixed"},
		{"bad engine", []string{"run", "--headless", "--engine", "tpu"}, nil, `engine "tpu"`},
		{"bad timeline", []string{"run", "--headless", "--timeline", "at 10x stall source-0"}, nil, "10x"},
		{"timeline names a missing source", []string{"run", "--headless", "--timeline", "at 1s stall source-5 for 1s"}, nil, "source-5"},
		{"too many sources", []string{"run", "--headless", "--sources", "65"}, nil, "--sources 65"},
		{"too many NUM_PREFILL_INSTANCES", []string{"run", "--headless"}, map[string]string{"NUM_PREFILL_INSTANCES": "100"}, `NUM_PREFILL_INSTANCES="100"`},
		{"negative content tokens", []string{"run", "--headless", "--content-tokens", "-1"}, nil, "--content-tokens -1: want 0 (no content check) or more"},
		{"content tokens past the context", []string{"slice", "--content-tokens", "113"}, nil, "--content-tokens 113: want at most 112 (the 400-token prompt and the completion must fit the engines' --max-model-len 512)"},
		{"bad content match", []string{"run", "--headless", "--content-match", "fuzzy"}, nil, `--content-match "fuzzy": want exact or prefix:N`},
		{"kube flag without --kube", []string{"run", "--headless", "--kube-namespace", "llm-d"}, nil, "--kube-namespace: only with --kube"},
		{"kube with launch flags", []string{"run", "--headless", "--kube", "--sources", "3", "--free-ports"}, nil, "--kube: --sources, --free-ports launch engines"},
		{"kube and attach", []string{"run", "--headless", "--kube", "--attach", "x.yaml"}, nil, "--kube and --attach: give one"},
		{"kube without namespace", []string{"run", "--headless", "--kube", "--kube-sources", "a=b", "--kube-decoder", "c=d", "--arm", "main"}, nil, "--kube-namespace is required"},
		{"kube slice in parallel", []string{"slice", "--kube", "--parallel", "2"}, nil, "--parallel 2 with --kube"},
		{"kube remove", []string{"run", "--headless", "--kube", "--kube-namespace", "x", "--kube-sources", "a=b", "--kube-decoder", "c=d", "--arm", "main", "--case", "remove"}, nil, "remove: not supported on --kube: a deleted pod comes back by its controller (that is replace)"},
		{"doctor kube without namespace", []string{"doctor", "--kube", "--kube-sources", "a=b", "--kube-decoder", "c=d", "--arm", "main"}, nil, "--kube-namespace is required"},
		{"content match prefix of nothing", []string{"slice", "--content-match", "prefix:0"}, nil, `--content-match "prefix:0"`},
		{"bad load-failure policy", []string{"run", "--headless", "--kv-load-failure-policy", "retry"}, nil, `--kv-load-failure-policy "retry"`},
		{"FAULTS=1 with a run-only flag", []string{"--case", "kill"}, map[string]string{"FAULTS": "1"}, "FAULTS=1 runs the slice, which has no --case"},
		{"bad nemesis", []string{"run", "--headless", "--nemesis", "chaos", "--duration", "1m"}, nil, `--nemesis "chaos": want random`},
		{"duration with a timeline", []string{"run", "--headless", "--timeline", "at 1s kill source-0", "--duration", "10m"}, nil, "--duration 10m0s: a run with a case or a timeline ends at its last fault window's recovery; lengthen it with --recovery"},
		{"duration with a case", []string{"run", "--headless", "--case", "stall", "--duration", "10m"}, nil, "lengthen it with --recovery"},
		{"nemesis without a duration", []string{"run", "--headless", "--nemesis", "random"}, nil, "--nemesis random needs --duration"},
		{"nemesis with a case", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--case", "stall"}, nil, "--nemesis draws the run's faults: it takes no --case"},
		{"nemesis with a timeline", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--timeline", "at 1s kill source-0"}, nil, "it takes no --timeline"},
		{"nemesis flag without --nemesis", []string{"run", "--headless", "--nemesis-seed", "7"}, nil, "--nemesis-seed needs --nemesis random"},
		{"nemesis unknown kind", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-kinds", "stall,explode"}, nil, `--nemesis-kinds explode: unknown fault kind "explode"`},
		{"nemesis kind that stays down", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-kinds", "remove"}, nil, "--nemesis-kinds remove: remove cannot fire repeatedly (it leaves its source down)"},
		{"nemesis loss without its share", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-kinds", "loss"}, nil, "--nemesis-kinds loss: loss takes a share such as 30%"},
		{"nemesis kind twice", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-kinds", "kill,kill"}, nil, "--nemesis-kinds kill: given twice"},
		{"nemesis spread over the gap", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-gap", "10s", "--nemesis-gap-spread", "20s"}, nil, "--nemesis-gap-spread 20s: want 0 to --nemesis-gap (10s)"},
		{"nemesis zero length", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-length", "0s"}, nil, "--nemesis-length 0s: want a positive duration"},
		{"nemesis length spread", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-length-spread", "30s"}, nil, "--nemesis-length-spread 30s: want 0 or more and less than --nemesis-length (30s)"},
		{"nemesis at once 0", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-at-once", "0"}, nil, "--nemesis-at-once 0: want 1 or more"},
		{"nemesis missing source", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-sources", "0,5"}, nil, "nemesis sources: source-5 is not in the cluster (sources 0-1)"},
		{"nemesis source twice", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-sources", "1,1"}, nil, "--nemesis-sources 1: given twice"},
		{"nemesis bad source", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-sources", "one"}, nil, "nemesis-sources"},
		{"nemesis bad rank", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-sources", "0/x"}, nil, `--nemesis-sources "0/x": want a source index (0) or a source's rank (0/1)`},
		{"nemesis rank of a source of one", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-sources", "0/1"}, nil, "names source-0/rank1, but source-0 has one engine core"},
		{"timeline rank of a source of one", []string{"run", "--headless", "--timeline", "at 1s stall source-0/rank1"}, nil, "names source-0/rank1, but source-0 has one engine core"},
		{"timeline rank past the source's", []string{"run", "--headless", "--source-dp", "2", "--timeline", "at 1s stall source-1/rank2"}, nil, "names source-1/rank2, but source-1 has ranks 0-1"},
		{"source-dp out of range", []string{"run", "--headless", "--source-dp", "0"}, nil, "--source-dp 0: want 1 to 16"},
		{"decoders out of range", []string{"run", "--headless", "--decoders", "17"}, nil, "--decoders 17: want 1 to 16"},
		{"nemesis run too short", []string{"run", "--headless", "--nemesis", "random", "--duration", "30s"}, nil, "no nemesis fault fits in the run"},
		{"FAULTS=1 with --nemesis", []string{"--nemesis", "random"}, map[string]string{"FAULTS": "1"}, "FAULTS=1 runs the slice, which has no --nemesis"},
		{"bad events compression", []string{"run", "--headless", "--events-compress", "gzip"}, nil, `--events-compress "gzip": want none or zstd`},
		{"slice bad arm", []string{"slice", "--arms", "main,broken"}, nil, `arm "broken"`},
		{"slice with fixed ports in parallel", []string{"slice", "--source-port", "9100"}, nil, "add --parallel 1"},
		{"slice bad case", []string{"slice", "--cases", "stall,none"}, nil, `"none"`},
		{"slice vllm arm without NAME=", []string{"slice", "--engine", "vllm", "--arm", "main"}, nil, `--arm "main"`},
		{"report without a file", []string{"report"}, nil, "want one events.jsonl"},
		{"report with a negative ladder", []string{"report", "--ladder", "-1", "a/events.jsonl"}, nil, "--ladder -1: want a number of pulls, 0 or more"},
		{"report of two files", []string{"report", "a/events.jsonl", "b/events.jsonl"}, nil, "report: want one events.jsonl file, got 2 arguments"},
		{"gen-docs without a folder", []string{"gen-docs"}, nil, "gen-docs: want one folder, got 0 arguments"},
		{"report of a missing file", []string{"report", "/nonexistent/events.jsonl"}, nil, "/nonexistent/events.jsonl"},
		{"report of a folder without events", []string{"report", "/"}, nil, "events.jsonl"},
		{"cleanup of a missing folder", []string{"cleanup", "/nonexistent/run"}, nil, "/nonexistent/run"},
		{"cleanup of a file", []string{"cleanup", "/etc/hostname"}, nil, "/etc/hostname: not a folder"},
		{"cleanup of two folders", []string{"cleanup", "a", "b"}, nil, "at most one folder"},
		{"sim bad port", []string{"sim", "serve", "m", "--port", "http"}, nil, "port"},
		{"sim unknown flag", []string{"sim", "serve", "m", "--frobnicate"}, nil, "--frobnicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			args := append([]string{}, tt.args...)
			out := filepath.Join(t.TempDir(), "out")
			if tt.args[0] != "report" && tt.args[0] != "cleanup" && tt.args[0] != "sim" && tt.args[0] != "gen-docs" {
				args = append(args, "--out", out)
			}
			var stdout, stderr bytes.Buffer
			code := cli.Main(args, strings.NewReader(""), &stdout, &stderr)
			if code != 2 {
				t.Fatalf("p2pfault %s: exit %d, want 2\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("p2pfault %s: stderr %q does not name %q", strings.Join(args, " "), stderr.String(), tt.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("p2pfault %s: a usage error left the output folder %s behind", strings.Join(args, " "), out)
			}
		})
	}
}

// TestFixedPortTakenIsExit2NamingThePort: a port the user fixed that is
// taken stops the run before it starts, with the port in the message.
func TestFixedPortTakenIsExit2NamingThePort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	var stdout, stderr bytes.Buffer
	code := cli.Main([]string{"run", "--headless", "--case", "none", "--duration", "1s",
		"--source-port", strconv.Itoa(port), "--out", t.TempDir()}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), strconv.Itoa(port)) {
		t.Fatalf("stderr %q does not name port %d", stderr.String(), port)
	}
	// The run never started: no verdict table, which would read as a FAIL.
	if strings.Contains(stdout.String(), "faulted source p50") {
		t.Errorf("a run that could not start printed a verdict table:\n%s", stdout.String())
	}
}

// TestFaultsRefusesEveryRunOnlyFlag: FAULTS=1 makes bare p2pfault the
// slice, with run's flags. Every flag of run that the two commands' flag
// sets do not share (and --arm and --arms, which name run's arms where
// FAULTS=1 runs main,fixed) is refused with exit 2 naming it, before
// anything starts; a flag they share is not refused as run-only (a bad
// --time-scale ends those calls before a slice could start).
func TestFaultsRefusesEveryRunOnlyFlag(t *testing.T) {
	t.Setenv("FAULTS", "1")
	root := cli.NewRoot(strings.NewReader(""), io.Discard, io.Discard)
	var run, slice *pflag.FlagSet
	for _, c := range root.Commands() {
		switch c.Name() {
		case "run":
			run = c.Flags()
		case "slice":
			slice = c.Flags()
		}
	}
	if run == nil || slice == nil {
		t.Fatal("no run or slice command")
	}
	refused := 0
	run.VisitAll(func(f *pflag.Flag) {
		runOnly := slice.Lookup(f.Name) == nil || f.Name == "arm" || f.Name == "arms"
		t.Run(f.Name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			value := f.DefValue // given, it is Changed all the same
			if f.Value.Type() == "intSlice" {
				value = "0" // "[]" does not parse as one
			}
			args := []string{"--" + f.Name + "=" + value, "--time-scale=-1", "--out", out}
			var stdout, stderr bytes.Buffer
			code := cli.Main(args, strings.NewReader(""), &stdout, &stderr)
			if code != 2 {
				t.Fatalf("FAULTS=1 p2pfault %s: exit %d, want 2\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
			}
			said := strings.Contains(stderr.String(), "FAULTS=1 runs the slice") && strings.Contains(stderr.String(), "--"+f.Name)
			switch {
			case runOnly && !said:
				t.Errorf("FAULTS=1 took run's --%s: stderr %q, want it refused by name", f.Name, stderr.String())
			case !runOnly && strings.Contains(stderr.String(), "FAULTS=1 runs the slice"):
				t.Errorf("FAULTS=1 refused --%s, which the slice has too: %q", f.Name, stderr.String())
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a usage error left the output folder %s behind", out)
			}
		})
		if runOnly {
			refused++
		}
	})
	// case, arm, arms, headless, duration, timeline, events-compress, the
	// nemesis' nine: a list that comes out short lost its run-only flags.
	if refused < 16 {
		t.Errorf("%d run-only flags, want at least 16", refused)
	}
}
