package cli_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"p2pfault/cli"
)

// doctorMain runs p2pfault in-process and returns its exit code, stdout
// and stderr.
func doctorMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// doctorEnv makes the test binary act as p2pfault for the simulated
// engine's `sim serve --help`, with no PYTHONHASHSEED or
// CUDA_VISIBLE_DEVICES of the caller's, and no orphan of another test's
// (the host is shared with other packages' tests).
func doctorEnv(t *testing.T) {
	t.Helper()
	t.Setenv("P2PFAULT_TEST_MAIN", "1")
	cli.HideHostOrphans(t)
	for _, k := range []string{"PYTHONHASHSEED", "CUDA_VISIBLE_DEVICES", "FAULTS", "FAULT_CASE", "NUM_PREFILL_INSTANCES"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// standIns writes a stand-in vllm (serve --help=all lists the options of
// the launch but those in drop) and nvidia-smi (four GPUs) into a folder
// put first on PATH, and returns the vllm's path.
func standIns(t *testing.T, drop string) string {
	t.Helper()
	dir := t.TempDir()
	opts := []string{"--block-size", "--enable-prompt-tokens-details", "--enforce-eager", "--gpu-memory-utilization", "--host",
		"--kv-transfer-config", "--max-model-len", "--port", "--tensor-parallel-size"}
	var help strings.Builder
	for _, o := range opts {
		if o != drop {
			fmt.Fprintf(&help, "  %s %s\n                        (default: None)\n", o, strings.ToUpper(strings.ReplaceAll(o[2:], "-", "_")))
		}
	}
	vllm := filepath.Join(dir, "vllm")
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(vllm, `case "$1 $2" in
"--version ") echo 0.11.1 ;;
"serve --help=all") cat <<'HELP'
usage: vllm serve [model_tag] [options]

options:
`+help.String()+`  -h, --help            show this help message and exit
HELP
;;
*) echo "vllm stand-in: $*" >&2; exit 2 ;;
esac
`)
	write(filepath.Join(dir, "nvidia-smi"), `[ "$1" = -L ] || exit 2
for i in 0 1 2 3; do echo "GPU $i: NVIDIA A100-SXM4-80GB (UUID: GPU-5a2b9c1e-0000-4000-8000-00000000000$i)"; done
`)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return vllm
}

// TestDoctorExitsZeroOneOrTwo: every check passing is exit 0 with a line
// per check; one failing is exit 1 naming it on stdout and the count on
// stderr; a bad flag is exit 2 with run's own error.
func TestDoctorExitsZeroOneOrTwo(t *testing.T) {
	doctorEnv(t)
	vllm := standIns(t, "")
	vllmRun := []string{"doctor", "--engine", "vllm", "--vllm-bin", vllm, "--gpus", "0,1", "--free-ports"}

	t.Run("sim passes", func(t *testing.T) {
		code, out, errOut := doctorMain(t, "doctor")
		if code != 0 {
			t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
		}
		for _, want := range []string{"✓ sim engine: ", "✓ sim serve flags: ", "✓ ports: ", "✓ PYTHONHASHSEED: p2pfault starts all 3 engines with PYTHONHASHSEED=42", "✓ leftovers: no firewall table or engine of a p2pfault that is gone\n", "doctor: all 5 checks passed\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("vllm passes", func(t *testing.T) {
		code, out, errOut := doctorMain(t, vllmRun...)
		if code != 0 {
			t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
		}
		for _, want := range []string{"✓ vllm: " + vllm + ", version 0.11.1\n", "✓ vllm serve flags: " + vllm + " serve --help=all lists all 9 options the run passes\n",
			"✓ GPUs: nvidia-smi -L lists 4 GPUs", "✓ GPU memory: 3 engines on 2 GPUs", "doctor: all 7 checks passed\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("a failing check is exit 1", func(t *testing.T) {
		code, out, errOut := doctorMain(t, append(vllmRun[:len(vllmRun):len(vllmRun)], "--engine-arg=--max-num-seqs=8")...)
		if code != 1 {
			t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
		}
		want := "✗ vllm serve flags: " + vllm + " serve --help=all does not list --max-num-seqs (from --engine-arg or the arm), which the run passes → drop or correct the --engine-arg that passes it\n"
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks\n%s\ngot:\n%s", want, out)
		}
		if errOut != "p2pfault: doctor: 1 of 7 checks failed\n" {
			t.Errorf("stderr %q", errOut)
		}
	})
	t.Run("a bad flag is exit 2", func(t *testing.T) {
		code, out, errOut := doctorMain(t, "doctor", "--case", "explode")
		if code != 2 || out != "" || errOut != "p2pfault: --case \"explode\": want stall, kill, replace, remove, partition, gone, late-fetch, half-open, ack-withheld, fetch-lost, slow-link or none\n" {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

// TestDoctorGivesRunsAndSlicesUsageErrors: the flags doctor refuses, it
// refuses with run's (or slice's) exit code and words, for each of its
// forms: `doctor ARGS` and `doctor run ARGS` as `run ARGS`, `doctor slice
// ARGS` as `slice ARGS`.
func TestDoctorGivesRunsAndSlicesUsageErrors(t *testing.T) {
	doctorEnv(t)
	attachFile := filepath.Join(t.TempDir(), "attach.yaml")
	if err := os.WriteFile(attachFile, []byte("model: m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cmd  string
		args []string
		env  map[string]string
	}{
		{"run", []string{"--bogus"}, nil},
		{"run", []string{"--case", "explode"}, nil},
		{"run", nil, map[string]string{"FAULT_CASE": "melt"}},
		{"run", nil, map[string]string{"NUM_PREFILL_INSTANCES": "two"}},
		{"run", []string{"--time-scale", "-1"}, nil},
		{"run", []string{"--time-scale", "fast"}, nil},
		{"run", []string{"--interval", "0s"}, nil},
		{"run", []string{"--bound-healthy-hit-rate", "1.5"}, nil},
		{"run", []string{"--arm", "broken"}, nil},
		{"run", []string{"--arms", "main,main"}, nil},
		{"run", []string{"--arm", "main", "--arms", "main,fixed"}, nil},
		{"run", []string{"--arm", "main=/bin/true"}, nil},
		{"run", []string{"--engine", "vllm", "--arms", "a,b"}, nil},
		{"run", []string{"--engine", "vllm", "--arm", "a=/x/vllm", "--arm", "b=/y/vllm", "--gpus", "0"}, nil},
		{"run", []string{"--arms", "main,fixed", "--decoder-port", "9200"}, nil},
		{"run", []string{"--engine", "tpu"}, nil},
		{"run", []string{"--engine", "vllm", "--engine-arg=--sim-startup-delay=1s"}, nil},
		{"run", []string{"--timeline", "at 10x stall source-0"}, nil},
		{"run", []string{"--timeline", "at 1s stall source-5 for 1s"}, nil},
		{"run", []string{"--sources", "65"}, nil},
		{"run", []string{"--kv-load-failure-policy", "retry"}, nil},
		{"run", []string{"--attach", attachFile, "--sources", "3"}, nil},
		{"slice", []string{"--arms", "main,broken"}, nil},
		{"slice", []string{"--source-port", "9100"}, nil},
		{"slice", []string{"--cases", "stall,none"}, nil},
		{"slice", []string{"--engine", "vllm", "--arm", "main"}, nil},
		{"slice", []string{"--attach", attachFile, "--arms", "a,b"}, nil},
		{"slice", []string{"--attach", attachFile, "--cases", "remove,stall"}, nil},
	}
	for _, tt := range tests {
		name := tt.cmd + " " + strings.Join(tt.args, " ")
		for k, v := range tt.env {
			name += " " + k + "=" + v
		}
		t.Run(name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			// A folder of the test's, should a case of the table start a run.
			tt.args = append(tt.args[:len(tt.args):len(tt.args)], "--out", filepath.Join(t.TempDir(), "out"))
			wantCode, _, want := doctorMain(t, append([]string{tt.cmd}, tt.args...)...)
			if wantCode != 2 {
				t.Fatalf("p2pfault %s %s: exit %d, want a usage error (the table is wrong)", tt.cmd, tt.args, wantCode)
			}
			forms := [][]string{append([]string{"doctor", tt.cmd}, tt.args...)}
			if tt.cmd == "run" {
				forms = append(forms, append([]string{"doctor"}, tt.args...))
			}
			for _, args := range forms {
				code, out, got := doctorMain(t, args...)
				// cobra names the command in a flag error: "doctor run: ...
				// (see `p2pfault doctor run --help`)".
				got = strings.ReplaceAll(got, "p2pfault doctor "+tt.cmd, "p2pfault "+tt.cmd)
				got = strings.ReplaceAll(got, "p2pfault doctor", "p2pfault "+tt.cmd)
				got = strings.ReplaceAll(got, "p2pfault: doctor "+tt.cmd+": ", "p2pfault: "+tt.cmd+": ")
				got = strings.ReplaceAll(got, "p2pfault: doctor: ", "p2pfault: "+tt.cmd+": ")
				if code != 2 || got != want || out != "" {
					t.Errorf("p2pfault %s: exit %d, stderr %q, stdout %q\nwant exit 2, stderr %q", strings.Join(args, " "), code, got, out, want)
				}
			}
		})
	}
}

// TestDoctorWithFaultsSetPointsToDoctorSlice: FAULTS=1 makes bare
// p2pfault the slice, so bare doctor says which doctor checks that.
func TestDoctorWithFaultsSetPointsToDoctorSlice(t *testing.T) {
	doctorEnv(t)
	t.Setenv("FAULTS", "1")
	code, _, errOut := doctorMain(t, "doctor")
	if code != 2 || !strings.Contains(errOut, "check it with `p2pfault doctor slice`") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestDoctorSliceCountsTheRowsAtOnce: a vllm slice runs its rows one at a
// time on all of --gpus, so one GPU per two engines suffices; with
// --parallel 3 the rows share them and GPU 0 is over-full.
func TestDoctorSliceCountsTheRowsAtOnce(t *testing.T) {
	doctorEnv(t)
	vllm := standIns(t, "")
	args := []string{"doctor", "slice", "--engine", "vllm", "--arm", "main=" + vllm, "--gpus", "0,1", "--free-ports"}
	if code, out, errOut := doctorMain(t, args...); code != 0 || !strings.Contains(out, "✓ GPU memory: 3 engines on 2 GPUs") {
		t.Errorf("one row at a time: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ := doctorMain(t, append(args, "--parallel", "3")...)
	if code != 1 || !strings.Contains(out, "✗ GPU memory: GPU 0 would hold main/stall/source-0, main/stall/decoder, main/kill/source-0, main/kill/decoder, main/remove/source-0, main/remove/decoder") {
		t.Errorf("three rows at once: exit %d\n%s", code, out)
	}
}

// TestDoctorChecksAnAttachedCluster: engines the test started, attached;
// the file's engines answer and share PYTHONHASHSEED=42 (read from
// /proc), and a kill case needs a command the file does not give one
// source.
func TestDoctorChecksAnAttachedCluster(t *testing.T) {
	doctorEnv(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dec, srcs := attachedCluster(t, exe, 1)
	dir := t.TempDir()
	file := writeAttachFile(t, dir, dec, srcs, map[string]string{"source-1": "\n      stall: [true]\n      resume: [true]"}, "")

	code, out, errOut := doctorMain(t, "doctor", "--attach", file, "--case", "stall")
	if code != 0 {
		t.Fatalf("stall: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"✓ attach decoder: " + dec.url() + " answers /health\n",
		// The P2P port is the engine core's, a child in the engine's session.
		fmt.Sprintf("✓ attach source-0: %s answers /health; P2P %s held by pid ", srcs[0].url(), srcs[0].p2pAddr()),
		fmt.Sprintf(" in session %d: local faults\n", srcs[0].pid),
		"✓ attach source-1: " + srcs[1].url() + " answers /health; P2P " + srcs[1].p2pAddr() + " listens; faults by command: stall, resume\n",
		"✓ attach steps: ",
		fmt.Sprintf("✓ attach PYTHONHASHSEED: PYTHONHASHSEED=42 in decoder (pid %d), source-0 (pid %d), source-1 (pid %d)\n", dec.pid, srcs[0].pid, srcs[1].pid),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = doctorMain(t, "doctor", "--attach", file, "--timeline", "at 1s kill source-1")
	if code != 1 || !strings.Contains(out, "✗ attach steps: ") || !strings.Contains(out, "source-1") {
		t.Errorf("kill source-1 without a kill command: exit %d\n%s", code, out)
	}
}

// TestDoctorWithoutNetAdminFailsThePartitionLine: under an empty
// capability set doctor reports a partition's missing CAP_NET_ADMIN as a
// failed check (exit 1), and still refuses a bad timeline as run does
// (exit 2).
func TestDoctorWithoutNetAdminFailsThePartitionLine(t *testing.T) {
	pre := dropCaps(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		cmd := exec.Command(pre[0], append(pre[1:], append([]string{exe}, args...)...)...)
		cmd.Env = append(os.Environ(), "P2PFAULT_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	code, out, errOut := run("doctor", "--case", "partition", "--free-ports")
	want := "✗ partition: partition needs CAP_NET_ADMIN: missing here → run as root or grant it with setcap cap_net_admin+ep " + exe + "\n"
	if code != 1 || !strings.Contains(out, want) {
		t.Errorf("exit %d, want 1 with\n%s\ngot:\n%s%s", code, want, out, errOut)
	}
	code, out, errOut = run("doctor", "--timeline", "at 1s partition source-5 for 1s")
	if code != 2 || !strings.Contains(errOut, "source-5") || out != "" {
		t.Errorf("a timeline naming a missing source: exit %d, want 2 naming it\n%s%s", code, out, errOut)
	}
}
