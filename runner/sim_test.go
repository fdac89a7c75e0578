package runner_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

// procEnv reads one variable of a running process's environment.
func procEnv(t *testing.T, pid int, key string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok && k == key {
			return v
		}
	}
	return ""
}

func procArgv(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// TestSimClusterRunsBothProcessesOfEachEngine starts real simulated
// engines: each session holds the front end and the engine core.
func TestSimClusterRunsBothProcessesOfEachEngine(t *testing.T) {
	c, rec := startCluster(t, simConfig(t))
	for _, e := range c.Engines() {
		in := e.Info()
		if in.State != event.StateReady || len(in.Members) != 2 {
			t.Errorf("%s: %s with members %v, want ready with front end + core", e.Name(), in.State, in.Members)
		}
		var roles []string
		for _, pid := range in.Members {
			argv := procArgv(t, pid)
			if len(argv) > 2 {
				roles = append(roles, argv[2])
			}
		}
		slices.Sort(roles)
		if !slices.Equal(roles, []string{"core", "serve"}) {
			t.Errorf("%s: session runs %q, want `sim serve` and `sim core`", e.Name(), roles)
		}
		if !rec.hasLine(e.Name(), "engine ready") {
			t.Errorf("%s: no 'engine ready' line; tail %q", e.Name(), e.LogTail(5))
		}
	}
}

// TestVLLMPathEndToEndThroughScript runs the vllm launch path with
// --vllm-bin pointing at a script that execs this binary's sim: the argv
// and environment vllm would get must bring a working cluster up.
func TestVLLMPathEndToEndThroughScript(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "vllm")
	body := "#!/bin/sh\n# stands for vllm: `vllm serve MODEL ...` -> `p2pfault sim serve MODEL ...`\nexec '" + self + "' sim \"$@\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := simConfig(t)
	cfg.Engine, cfg.VLLMBin, cfg.TimeScale = runner.EngineVLLM, script, 0
	cfg.GPUs = []string{"0", "1"}
	c, _ := startCluster(t, cfg)

	for i, e := range c.Engines() {
		in := e.Info()
		if in.State != event.StateReady || len(in.Members) != 2 {
			t.Errorf("%s: %s with members %v", e.Name(), in.State, in.Members)
			continue
		}
		argv := procArgv(t, in.Pid)
		// After exec the front end is `self sim serve MODEL ...`: the
		// script's "$@" is exactly the planned vllm argv after the binary.
		spec := e.Spec()
		want := append([]string{self, "sim"}, spec.Args...)
		if spec.Path != script || spec.Args[0] != "serve" || !slices.Equal(argv, want) {
			t.Errorf("%s: started %q as %q, want %q", e.Name(), spec.Path, argv, want)
		}
		for key, val := range map[string]string{"CUDA_VISIBLE_DEVICES": []string{"0", "1", "0"}[i], "PYTHONHASHSEED": "42"} {
			if got := procEnv(t, in.Pid, key); got != val {
				t.Errorf("%s: %s=%q, want %q", e.Name(), key, got, val)
			}
		}
	}
}

func TestSimStartFailureNamesEngineAndItsError(t *testing.T) {
	cfg := simConfig(t)
	cfg.SourceArgs = []string{"--no-such-flag"}
	rec := newRecorder()
	cfg.OnChange = rec.onChange
	t.Cleanup(func() { killSessions(rec.allSids()) })
	_, err := runner.Start(context.Background(), cfg)
	if err == nil {
		t.Fatal("start succeeded with a flag the engine rejects")
	}
	for _, want := range []string{"source-0", "exited with code 2 before it was ready", "no-such-flag"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if exitcode.Code(err) != exitcode.Usage {
		t.Errorf("exit code %d, want 2", exitcode.Code(err))
	}
	for _, sid := range rec.allSids() {
		if live, _ := session.Live(sid); len(live) > 0 {
			t.Errorf("session %d left running: %v", sid, live)
		}
	}
}
