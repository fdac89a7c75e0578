package attach

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/fault"
	"p2pfault/internal/sessiontest"
)

// fakeKubectl writes a script standing in for kubectl: it appends its
// arguments, one line per call, to log, and prints them.
func fakeKubectl(t *testing.T, dir, log string) string {
	t.Helper()
	path := filepath.Join(dir, "kubectl")
	body := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + log + "'\necho \"fake kubectl: $*\"\n"
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func commandsYAML(kubectl string, actions ...string) string {
	var b strings.Builder
	for _, a := range actions {
		fmt.Fprintf(&b, "\n      %s: [%s, %s, \"{name}\", \"--host={host}\", \"{port}\", \"p2p={p2p_host}:{p2p_port}\"]", a, kubectl, a)
	}
	return b.String()
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

func TestCommandFaultsRunEachActionOnceWithPlaceholdersInOrder(t *testing.T) {
	dec, srcs := fakeDecoder(t), []engine{startEngine(t, "source-0")}
	dir := t.TempDir()
	log := filepath.Join(dir, "argv.log")
	k := fakeKubectl(t, dir, log)
	path := writeFile(t, dir, dec, srcs, map[string]string{"source-0": commandsYAML(k, Actions()...)})
	g, genv := guardArgv(t)
	c := openLocal(t, path, Options{LogDir: dir, Guard: g, GuardEnv: genv, ReadyTimeout: 10 * time.Second})
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	src, _ := c.Source("source-0")
	if src.Local() {
		t.Fatal("a source with commands is local")
	}
	order := []string{fault.ActionStall, fault.ActionResume, fault.ActionKill, fault.ActionReady, fault.ActionRemove, fault.ActionRestore}
	for _, a := range order {
		r, err := src.Do(context.Background(), a)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if r.ExitCode != 0 || !strings.HasPrefix(r.Output, "fake kubectl: "+a+" source-0") || r.Argv[0] != k {
			t.Errorf("%s result %+v", a, r)
		}
	}
	e := srcs[0]
	var want []string
	for _, a := range order {
		want = append(want, fmt.Sprintf("%s source-0 --host=127.0.0.1 %d p2p=127.0.0.1:%d", a, e.http, e.p2p))
	}
	if got := readLines(t, log); !slices.Equal(got, want) {
		t.Errorf("commands ran:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Nothing was signalled locally: the engine ran throughout.
	if st := sessiontest.States(t, e.pid); strings.Contains(st, "T") || len(st) != 2 {
		t.Errorf("engine states %q", st)
	}
}

func TestCommandStallIsResumedByCloseAndByTheGuard(t *testing.T) {
	dec, srcs := fakeDecoder(t), []engine{startEngine(t, "source-0")}
	dir := t.TempDir()
	log := filepath.Join(dir, "argv.log")
	k := fakeKubectl(t, dir, log)
	path := writeFile(t, dir, dec, srcs, map[string]string{"source-0": commandsYAML(k, fault.ActionStall, fault.ActionResume)})

	// Close resumes a stall in force.
	c := openLocal(t, path, Options{LogDir: dir})
	src, _ := c.Source("source-0")
	if _, err := src.Do(context.Background(), fault.ActionKill); err == nil || !strings.Contains(err.Error(), "source-0: kill: the attach file gives no kill command") {
		t.Errorf("kill without a command: %v", err)
	}
	if _, err := src.Do(context.Background(), fault.ActionStall); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, log); len(got) != 2 || !strings.HasPrefix(got[1], "resume source-0") {
		t.Errorf("after Close: %q", got)
	}

	// A SIGKILLed p2pfault's guard runs the resume command.
	_ = os.Remove(log)
	child, line := startChild(t, stallerEnv+"="+path, stallerSourceEnv+"=source-0")
	if !strings.HasPrefix(line, "stalled ") || line == "stalled 0" {
		t.Fatalf("child said %q", line)
	}
	gpid, _ := strconv.Atoi(strings.Fields(line)[1])
	t.Cleanup(func() { killSession(gpid) })
	child.kill()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), "resume source-0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no resume command 5 s after SIGKILL; log %q", b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := readLines(t, log); len(got) != 2 || !strings.HasPrefix(got[0], "stall source-0") {
		t.Errorf("commands: %q", got)
	}
}

func TestCommandFailureNamesSourceActionStatusAndOutput(t *testing.T) {
	dec, srcs := fakeDecoder(t), []engine{startEngine(t, "source-0")}
	dir := t.TempDir()
	fail := filepath.Join(dir, "kubectl")
	if err := os.WriteFile(fail, []byte("#!/bin/sh\necho 'Error from server (NotFound): pods \"'$1'\" not found' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(dir, "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, dir, dec, srcs, map[string]string{"source-0": fmt.Sprintf("\n      kill: [%s, \"{name}\"]\n      remove: [%s]", fail, slow)})
	c := openLocal(t, path, Options{LogDir: dir, CommandTimeout: 300 * time.Millisecond})
	src, _ := c.Source("source-0")
	r, err := src.Do(context.Background(), fault.ActionKill)
	if err == nil {
		t.Fatal("a kill command exiting 3 succeeded")
	}
	for _, want := range []string{"source-0: kill: ", "exited with status 3", `pods "source-0" not found`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if r.ExitCode != 3 || !strings.Contains(r.Output, "NotFound") {
		t.Errorf("result %+v", r)
	}
	start := time.Now()
	_, err = src.Do(context.Background(), fault.ActionRemove)
	if err == nil || !strings.Contains(err.Error(), "source-0: remove: ") || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Errorf("slow remove: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timed-out command took %v", d)
	}
}

// A failed command's error keeps its chain through the Target the fault
// kinds act on: it is the cluster's (fault.ErrNotTaken), the command's
// exit status is an *exec.ExitError, and a command that ran out of time is
// a context.DeadlineExceeded.
func TestCommandErrorsKeepTheirChain(t *testing.T) {
	dec, srcs := fakeDecoder(t), []engine{startEngine(t, "source-0")}
	dir := t.TempDir()
	fail := filepath.Join(dir, "fail")
	if err := os.WriteFile(fail, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(dir, "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, dir, dec, srcs, map[string]string{"source-0": fmt.Sprintf("\n      kill: [%s]\n      remove: [%s]", fail, slow)})
	c := openLocal(t, path, Options{LogDir: dir, CommandTimeout: 200 * time.Millisecond})
	src, _ := c.Source("source-0")
	_, err := src.Kill(context.Background(), nil)
	var exit *exec.ExitError
	if !errors.Is(err, fault.ErrNotTaken) || !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("Kill = %v, want fault.ErrNotTaken and an *exec.ExitError with status 3 in its chain", err)
	}
	err = src.Terminate(context.Background(), nil)
	if !errors.Is(err, fault.ErrNotTaken) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Errorf("Terminate = %v, want fault.ErrNotTaken and context.DeadlineExceeded in its chain", err)
	}
	if _, err := src.Do(context.Background(), fault.ActionKill); !errors.As(err, &exit) || !strings.HasPrefix(err.Error(), "source-0: kill: ") {
		t.Errorf("Do(kill) = %v, want it named and the *exec.ExitError in its chain", err)
	}
}
