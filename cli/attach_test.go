package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"p2pfault/attach"
	"p2pfault/cli"
	"p2pfault/internal/sessiontest"
	"p2pfault/runner/session"
)

// simEngine is an engine the test started itself with `p2pfault sim
// serve`, in a session of its own, as a user's script would: p2pfault did
// not start it.
type simEngine struct {
	name      string
	http, p2p int
	pid       int // the leader; its session id too
	argv      []string
	ranks     int // --data-parallel-size (0: none given); the attach file's ranks
}

func (e simEngine) url() string     { return "http://127.0.0.1:" + strconv.Itoa(e.http) }
func (e simEngine) p2pAddr() string { return "127.0.0.1:" + strconv.Itoa(e.p2p) }

// handedOut are the ports loopbackPort gave: the kernel may give a
// just-closed port out again, and two engines handed one port would have
// the second fail to bind (seen in a CI run: an engine's HTTP port was its
// own P2P port).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// loopbackPort is a loopback port free a moment ago, never one it handed
// out before in this test binary.
func loopbackPort(t *testing.T) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}

// loopbackRun is the first of n consecutive loopback ports free a moment
// ago and never handed out before (a DP engine's P2P ports, base + rank).
func loopbackRun(t *testing.T, n int) int {
	t.Helper()
	for {
		base := loopbackPort(t)
		free := true
		for r := 1; r < n && free; r++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(base+r))
			handedOut.Lock()
			free = err == nil && !handedOut.ports[base+r]
			handedOut.Unlock()
			if err == nil {
				l.Close()
			}
		}
		if free {
			handedOut.Lock()
			for r := 1; r < n; r++ {
				handedOut.ports[base+r] = true
			}
			handedOut.Unlock()
			return base
		}
	}
}

// launchSimEngine starts bin as `sim serve` with run_accuracy_test.sh's
// flags and the sim's timeouts compressed to scale, and returns at once,
// with a function that waits until it answers /health (so a cluster's
// engines start side by side). At cleanup it SIGKILLs the session of
// whatever listens on its P2P port then (an engine p2pfault restarted) and
// its own. ranks > 1 starts it with
// --data-parallel-size ranks (rank r's P2P port base + r).
func launchSimEngine(t *testing.T, bin, name string, scale float64, ranks ...int) (simEngine, func()) {
	t.Helper()
	e := simEngine{name: name, http: loopbackPort(t), p2p: loopbackPort(t)}
	if len(ranks) > 0 && ranks[0] > 1 {
		e.ranks = ranks[0]
		e.p2p = loopbackRun(t, e.ranks)
	}
	kv, _ := json.Marshal(map[string]any{
		"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
		"kv_connector_extra_config": map[string]any{
			"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 209715200,
			"secondary_tiers":        []map[string]any{{"type": "p2p", "host": "127.0.0.1", "port": e.p2p}},
			"kv_load_failure_policy": "recompute",
		},
	})
	e.argv = []string{bin, "sim", "serve", "meta-llama/Llama-3.2-1B-Instruct",
		"--port", strconv.Itoa(e.http), "--host", "127.0.0.1",
		"--block-size", "128", "--max-model-len", "512", "--enable-prompt-tokens-details",
		"--kv-transfer-config", string(kv),
		"--sim-time-scale", strconv.FormatFloat(scale, 'g', -1, 64),
		// A restart of an attached engine takes as long as its start (the
		// same command line): 3 s, so a kill's window outlasts the detect
		// point (fault + 2 s) that faulted_median_after_detect judges from.
		"--sim-startup-delay", "3s"}
	if e.ranks > 1 {
		e.argv = append(e.argv, "--data-parallel-size", strconv.Itoa(e.ranks))
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(e.argv[0], e.argv[1:]...)
	cmd.Env = append(os.Environ(), "PYTHONHASHSEED=42", "GORACE=atexit_sleep_ms=0")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reaped whoever ends it
	t.Cleanup(func() {
		if l, err := attach.FindListener("127.0.0.1", e.p2p); err == nil {
			endSession(l.Sid)
		}
		endSession(e.pid)
	})
	return e, func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !answers(e.url()) {
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(logf.Name())
				t.Fatalf("%s did not answer /health in 60 s:\n%s", name, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func endSession(sid int) {
	if sid <= 1 || sid == os.Getpid() {
		return
	}
	_, _ = session.Signal(sid, syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = session.WaitGone(ctx, sid, 10*time.Millisecond)
}

func answers(url string) bool {
	c := http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get(url + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// writeAttachFile writes an attach file for dec and srcs; faults maps a
// source's name to the YAML after its `faults:` (empty: the default).
func writeAttachFile(t *testing.T, dir string, dec simEngine, srcs []simEngine, faults map[string]string, extra string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "model: meta-llama/Llama-3.2-1B-Instruct\ndecoder:\n  url: %s\nsources:\n", dec.url())
	for _, s := range srcs {
		fmt.Fprintf(&b, "  - name: %s\n    url: %s\n    p2p: %s\n", s.name, s.url(), s.p2pAddr())
		if s.ranks > 1 {
			fmt.Fprintf(&b, "    ranks: %d\n", s.ranks)
		}
		if f := faults[s.name]; f != "" {
			fmt.Fprintf(&b, "    faults:%s\n", f)
		}
	}
	b.WriteString(extra)
	path := filepath.Join(dir, "attach.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// attachedCluster starts a decoder and two sources with the plain build bin.
func attachedCluster(t *testing.T, bin string, scale float64) (simEngine, []simEngine) {
	t.Helper()
	// Side by side: each takes its --sim-startup-delay to start.
	dec, w0 := launchSimEngine(t, bin, "decoder", scale)
	s0, w1 := launchSimEngine(t, bin, "source-0", scale)
	s1, w2 := launchSimEngine(t, bin, "source-1", scale)
	for _, wait := range []func(){w0, w1, w2} {
		wait()
	}
	return dec, []simEngine{s0, s1}
}

// waitExit waits for p2pfault and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration, log *bytes.Buffer) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("p2pfault did not end in %v\n%s", limit, log)
	}
	return -1
}

// checkRunning: every engine is alive, no process of it in state T, and
// each answers /health.
func checkRunning(t *testing.T, engines []simEngine) {
	t.Helper()
	for _, e := range engines {
		l, err := attach.FindListener("127.0.0.1", e.p2p)
		if err != nil {
			t.Errorf("%s: nothing listens on its P2P port %d after the run: %v", e.name, e.p2p, err)
			continue
		}
		if st := sessiontest.States(t, l.Sid); st == "" || strings.Contains(st, "T") {
			t.Errorf("%s: session %d states %q, want running (none T)", e.name, l.Sid, st)
		}
		if !answers(e.url()) {
			t.Errorf("%s: /health does not answer after the run", e.name)
		}
	}
}

// readReport is readSliceReport of a run of one row.
func readReport(t *testing.T, out string) sliceReport {
	t.Helper()
	rep := readSliceReport(t, out)
	if len(rep.Rows) != 1 {
		t.Fatalf("%d rows, want 1: %+v", len(rep.Rows), rep.Rows)
	}
	return rep
}

// TestAttachedStallLeavesEnginesRunning: three engines the test started
// (each in its own session), attached with local faults; a short stall of
// source-0 stops its session (the headless output names its pid), and
// afterwards the three engines run (none in state T) and answer, p2pfault
// having stopped none of them, and the stall record is empty. What the
// stall's verdict is (main fails faulted_max on the handshake deadline) is
// TestVirtualSliceGivesTheSeedsTable's, and TestRealSliceAgreesWithTheVirtualCluster's
// on real processes.
func TestAttachedStallLeavesEnginesRunning(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs an attached cluster for ~5 s")
	}
	bin := buildP2pfault(t)
	dec, srcs := attachedCluster(t, bin, 0.25)
	dir := t.TempDir()
	file := writeAttachFile(t, dir, dec, srcs, nil, "")
	out := filepath.Join(dir, "out")
	cmd, log := startP2pfault(t, "run", "--attach", file, "--headless", "--time-scale", "0.25", "--out", out,
		"--timeline", "at 1s stall source-0 for 4s", "--recovery", "4s")
	if code := waitExit(t, cmd, 3*time.Minute, log); code != 0 && code != 1 {
		t.Fatalf("exit %d, want a verdict (0 or 1)\n%s", code, log)
	}
	t.Logf("p2pfault output:\n%s", tail(log.String(), 25))
	for _, want := range []string{"source-0 stopped (pid ", "fault: resume source-0"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the headless output does not say %q:\n%s", want, log)
		}
	}
	for _, e := range append([]simEngine{dec}, srcs...) {
		if _, err := session.Stat(e.pid); err != nil {
			t.Errorf("%s (pid %d) is gone after the run: %v", e.name, e.pid, err)
		}
	}
	checkRunning(t, append([]simEngine{dec}, srcs...))
	rec, err := os.ReadFile(filepath.Join(out, "stalls.json"))
	if err != nil || !strings.Contains(string(rec), `"stalls": []`) {
		t.Errorf("stalls.json after the run: %v\n%s", err, rec)
	}
}

// TestAttachedKillRestartsTheSourceFromProc: a kill of an attached local
// source: it comes back on the same ports, started by p2pfault from
// its /proc command line in a new session, and still runs after p2pfault
// has exited.
func TestAttachedKillRestartsTheSourceFromProc(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs an attached cluster for ~10 s")
	}
	bin := buildP2pfault(t)
	dec, srcs := attachedCluster(t, bin, 0.25)
	dir := t.TempDir()
	file := writeAttachFile(t, dir, dec, srcs, nil, "")
	out := filepath.Join(dir, "out")
	cmd, log := startP2pfault(t, "run", "--attach", file, "--headless", "--time-scale", "0.25", "--out", out,
		"--timeline", "at 1s kill source-0", "--recovery", "4s")
	if code := waitExit(t, cmd, 3*time.Minute, log); code != 0 && code != 1 {
		t.Fatalf("exit %d, want a verdict (0 or 1)\n%s", code, log)
	}
	t.Logf("p2pfault output:\n%s", tail(log.String(), 20))
	// The restarted source was probed again: a recovery window was judged.
	if r := readReport(t, out).Rows[0]; r.Recovery == nil || r.Recovery.N == 0 {
		t.Errorf("kill row %+v: want pulls in the recovery window after the restart", r)
	}
	if _, err := session.Stat(srcs[0].pid); err == nil {
		t.Errorf("the original source-0 (pid %d) is still alive: it was not killed", srcs[0].pid)
	}
	l, err := attach.FindListener("127.0.0.1", srcs[0].p2p)
	if err != nil {
		t.Fatalf("nothing listens on source-0's P2P port %d after p2pfault exited: %v", srcs[0].p2p, err)
	}
	hl, err := attach.FindListener("127.0.0.1", srcs[0].http)
	if err != nil || hl.Sid != l.Sid {
		t.Errorf("source-0's HTTP port %d: %+v, %v; want the session %d of its P2P port", srcs[0].http, hl, err, l.Sid)
	}
	if l.Sid == srcs[0].pid {
		t.Errorf("source-0's session is still the original %d", l.Sid)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(l.Sid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), srcs[0].argv; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("restarted source-0 runs %q, want the original command line %q", got, want)
	}
	logData, err := os.ReadFile(filepath.Join(out, "attached-source-0.log"))
	if err != nil || !strings.Contains(string(logData), "=== p2pfault kill of source-0") {
		t.Errorf("restarted engine's log: %v\n%.500s", err, logData)
	}
	checkRunning(t, append([]simEngine{dec}, srcs...))
}

// TestAttachedCommandFaults: sources faulted through the file's commands
// (scripts standing in for kubectl, logging their argv): each action ran
// once, placeholders filled in, in order. The engine is stalled for real
// by the scripts (kill -STOP of its session) so the run measures a stall.
func TestAttachedCommandFaults(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs an attached cluster for ~15 s")
	}
	bin := buildP2pfault(t)
	dec, srcs := attachedCluster(t, bin, 0.25)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "argv.log")
	kubectl := filepath.Join(dir, "kubectl")
	// A stand-in for kubectl: logs its argv; `exec ... -- kill -SIG -SID`
	// signals the engine's session as `kubectl exec` would in its pod.
	script := "#!/bin/sh\necho \"$*\" >> " + logPath + "\n" +
		"case \"$1\" in exec) shift; while [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\";; esac\n"
	if err := os.WriteFile(kubectl, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sid := strconv.Itoa(srcs[0].pid)
	faults := map[string]string{"source-0": fmt.Sprintf(`
      stall: [%s, exec, -n, llm-d, "{name}", --, kill, -STOP, --, -%s]
      resume: [%s, exec, -n, llm-d, "{name}", --, kill, -CONT, --, -%s]
      kill: [%s, delete, pod, -n, llm-d, "{name}", "--port={port}", "--p2p={p2p_host}:{p2p_port}", "--host={host}"]`,
		kubectl, sid, kubectl, sid, kubectl)}
	file := writeAttachFile(t, dir, dec, srcs, faults, "")
	out := filepath.Join(dir, "out")
	cmd, log := startP2pfault(t, "run", "--attach", file, "--headless", "--time-scale", "0.25", "--out", out,
		"--timeline", "at 1s stall source-0 for 4s; at 6s kill source-0", "--recovery", "4s")
	code := waitExit(t, cmd, 3*time.Minute, log)
	t.Logf("p2pfault exit %d, output:\n%s", code, tail(log.String(), 25))
	if code != 1 && code != 0 {
		t.Fatalf("exit %d, want a verdict (0 or 1)\n%s", code, log)
	}
	got, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	p := strconv.Itoa(srcs[0].http)
	p2p := strconv.Itoa(srcs[0].p2p)
	want := "exec -n llm-d source-0 -- kill -STOP -- -" + sid + "\n" +
		"exec -n llm-d source-0 -- kill -CONT -- -" + sid + "\n" +
		"delete pod -n llm-d source-0 --port=" + p + " --p2p=127.0.0.1:" + p2p + " --host=127.0.0.1\n"
	if string(got) != want {
		t.Errorf("the commands ran as\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(log.String(), "fault: stall source-0") || !strings.Contains(log.String(), "fault: kill source-0") {
		t.Errorf("no stall and kill fault events in the output:\n%s", log)
	}
	checkRunning(t, append([]simEngine{dec}, srcs...))
}

// TestSigkilledP2pfaultDuringAnAttachedStall: p2pfault is SIGKILLed while
// it holds a stall of an attached local source; within 2 s the stalled
// engine runs again (its guard sent SIGCONT), and it answers.
func TestSigkilledP2pfaultDuringAnAttachedStall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an attached cluster")
	}
	bin := buildP2pfault(t)
	dec, srcs := attachedCluster(t, bin, 0.25)
	dir := t.TempDir()
	file := writeAttachFile(t, dir, dec, srcs, nil, "")
	out := filepath.Join(dir, "out")
	cmd, log := startAttachedStall(t, file, out, "source-0", srcs[0])
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	for {
		st := sessiontest.States(t, srcs[0].pid)
		if st != "" && !strings.Contains(st, "T") {
			t.Logf("source-0 runs again %v after SIGKILL of p2pfault (states %q)", time.Since(killed).Round(time.Millisecond), st)
			break
		}
		if time.Since(killed) > 2*time.Second {
			t.Fatalf("2 s after SIGKILL of p2pfault, source-0's session is %q (still stopped)\n%s", st, log)
		}
		time.Sleep(5 * time.Millisecond)
	}
	checkRunning(t, append([]simEngine{dec}, srcs...))
	// The record still names the stall (p2pfault died holding it);
	// cleanup finds its session already running.
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"cleanup", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("cleanup exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	t.Logf("cleanup: %s", stdout.String())
	// It says what it found, not that it resumed what the guard had.
	if want := fmt.Sprintf("source-0: session %d is already running", srcs[0].pid); !strings.Contains(stdout.String(), want) || strings.Contains(stdout.String(), "resumed session") {
		t.Errorf("cleanup said %q, want %q and no \"resumed session\"", stdout.String(), want)
	}
}

// healthServer answers /health 200 on a loopback port.
func healthServer(t *testing.T) simEngine {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return simEngine{name: "health", http: l.Addr().(*net.TCPAddr).Port}
}

// p2pListener is a socket that listens (so a connect succeeds) and is
// held by this test process.
func p2pListener(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// orphanListener is a listening socket no process holds: its only
// descriptor is in flight over a unix socket (SCM_RIGHTS), which /proc
// shows as a listener without an owner, as for a process p2pfault cannot
// read (another PID namespace, another user's without root).
func orphanListener(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Sendmsg(fds[0], []byte{0}, syscall.UnixRights(int(f.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l.Close()
	t.Cleanup(func() { syscall.Close(fds[0]); syscall.Close(fds[1]) })
	return port
}

// TestAttachBadInputIsAUsageError: every problem an attach file can be
// found to have before the run is exit 2 with a message naming the file's
// line or the source and what is wrong, and no run starts.
func TestAttachBadInputIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	up := healthServer(t)
	nobody := loopbackPort(t) // free a moment ago: nobody listens
	src := func(name, url, p2p, faults string) string {
		s := fmt.Sprintf("  - name: %s\n    url: %s\n    p2p: %s\n", name, url, p2p)
		if faults != "" {
			s += "    faults:" + faults + "\n"
		}
		return s
	}
	head := "model: m\ndecoder:\n  url: " + up.url() + "\nsources:\n"
	p2p := "127.0.0.1:" + strconv.Itoa(p2pListener(t))
	for _, tt := range []struct {
		name string
		file string
		args []string
		want string
	}{
		{"unknown key with its line", head + src("source-0", up.url(), p2p, "") + "restore_at_ned: true\n", nil,
			`attach.yaml:8: unknown field "restore_at_ned"`},
		{"unreachable URL", "model: m\ndecoder:\n  url: http://127.0.0.1:" + strconv.Itoa(nobody) + "\nsources:\n" + src("source-0", up.url(), p2p, ""), nil,
			"decoder: http://127.0.0.1:" + strconv.Itoa(nobody) + " unreachable"},
		{"P2P address nobody listens on", head + src("source-0", up.url(), "127.0.0.1:"+strconv.Itoa(nobody), ""), nil,
			"source-0: P2P address 127.0.0.1:" + strconv.Itoa(nobody) + ": nobody listens on this host"},
		{"local process not found", head + src("source-0", up.url(), "127.0.0.1:"+strconv.Itoa(orphanListener(t)), ""), nil,
			"source-0: local faults: the process listening on P2P address 127.0.0.1:"},
		{"command not found", head + src("pod-a", up.url(), p2p, "\n      stall: [no-such-kubectl, exec, \"{name}\"]\n      resume: [true]"), nil,
			`pod-a: stall command: "no-such-kubectl" not found`},
		{"action the file gives no command for", head + src("pod-a", up.url(), p2p, "\n      stall: [true]\n      resume: [true]"), []string{"--case", "kill"},
			"source-0 (pod-a): kill: the attach file gives no kill command for this source"},
		{"launch flags", head + src("source-0", up.url(), p2p, ""), []string{"--engine", "vllm", "--sources", "3", "--gpus", "0"},
			"--attach: --engine, --gpus, --sources launch engines"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "attach.yaml")
			if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"run", "--attach", path, "--headless", "--case", "stall", "--out", out}, tt.args...)
			var stdout, stderr bytes.Buffer
			code := cli.Main(args, strings.NewReader(""), &stdout, &stderr)
			t.Logf("exit %d: %s", code, strings.ReplaceAll(strings.TrimSpace(stderr.String()), "\n", " / "))
			if code != 2 {
				t.Fatalf("exit %d, want 2\n%s%s", code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tt.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a run that could not start made its folder %s", out)
			}
		})
	}
}

// TestAttachedFaultCommandFailingIsAWarning: a stall command that exits
// non-zero during the run is a warning event naming the source, the action
// and the exit status with its output; the run goes on and fails its
// fault_window (the judged fault never fired). No command left anything
// stopped.
func TestAttachedFaultCommandFailingIsAWarning(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs an attached cluster")
	}
	bin := buildP2pfault(t)
	dec, srcs := attachedCluster(t, bin, 0.25)
	dir := t.TempDir()
	faults := map[string]string{"source-1": `
      stall: [sh, -c, "echo cannot reach the pod >&2; exit 3"]
      resume: ["true"]`}
	file := writeAttachFile(t, dir, dec, srcs, faults, "")
	out := filepath.Join(dir, "out")
	cmd, log := startP2pfault(t, "run", "--attach", file, "--headless", "--time-scale", "0.25", "--out", out,
		"--timeline", "at 1s stall source-1 for 2s", "--recovery", "4s")
	if code := waitExit(t, cmd, 3*time.Minute, log); code != 1 {
		t.Fatalf("exit %d, want 1 (the judged fault never fired)\n%s", code, log)
	}
	t.Logf("p2pfault output:\n%s", log.String())
	for _, want := range []string{
		`warning: fault action failed: at 250ms stall source-1 for 500ms: stall source-1: ["sh" "-c" "echo cannot reach the pod >&2; exit 3"] exited with status 3: cannot reach the pod`,
		"fault_window: empty window: the scripted fault at 0.2s never took effect",
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("output does not say %q", want)
		}
	}
	checkRunning(t, append([]simEngine{dec}, srcs...))
}

// TestSignalledP2pfaultResumesAnAttachedStall: SIGTERM or SIGINT (Ctrl-C)
// to p2pfault while it holds a stall of an attached source (a stall with
// no end, so only the way out resumes it): p2pfault exits 130 with its
// reports written, and the engine runs (not T) and answers.
func TestSignalledP2pfaultResumesAnAttachedStall(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs an attached cluster")
	}
	bin := buildP2pfault(t)
	dec, srcs := attachedCluster(t, bin, 0.25)
	dir := t.TempDir()
	file := writeAttachFile(t, dir, dec, srcs, nil, "")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			cmd, log := startAttachedStall(t, file, out, "source-0", srcs[0])
			time.Sleep(200 * time.Millisecond) // into the stall
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd, time.Minute, log); code != 130 {
				t.Errorf("exit %d after %v, want 130\n%s", code, sig, log)
			}
			if st := sessiontest.States(t, srcs[0].pid); st == "" || strings.Contains(st, "T") {
				t.Errorf("source-0's session is %q after p2pfault exited on %v, want running", st, sig)
			}
			if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
				t.Errorf("no report after %v: %v", sig, err)
			}
			// The output's last word on source-0 is that it runs again. (The
			// stall's own "fault: resume" event races the end of the event
			// stream on the way out, so it is not asked for.)
			if o := log.String(); strings.LastIndex(o, "] source-0 ready") < strings.LastIndex(o, "] source-0 stopped") {
				t.Errorf("the output's last state of source-0 is not ready:\n%s", tail(o, 15))
			}
			checkRunning(t, append([]simEngine{dec}, srcs...))
		})
	}
}

// TestAttachedRankStallStopsThatCoreAlone: `run --attach` with a stall of
// rank 1 of a DP source (`sim serve --data-parallel-size 2`, started with
// setsid; `ranks: 2` in the file) stops rank 1's engine core alone (state
// T), not the front end or rank 0's core; the stall is in stalls.json
// while it holds (its pids alone, part); and the run's end (SIGTERM: the
// stall has no end of its own) resumes it.
func TestAttachedRankStallStopsThatCoreAlone(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs an attached cluster")
	}
	bin := buildP2pfault(t)
	dec, srcs := dpCluster(t, bin, 0.25)
	src := srcs[0]
	front, core0, core1 := src.pid, rankCore(t, src, 0), rankCore(t, src, 1)
	dir := t.TempDir()
	file := writeAttachFile(t, dir, dec, srcs, nil, "")
	out := filepath.Join(dir, "out")
	cmd, log := startAttachedStall(t, file, out, "source-0/rank1", src)
	time.Sleep(200 * time.Millisecond) // into the stall
	if got := stoppedOf(t, src.pid); !slices.Equal(got, []int{core1}) {
		t.Errorf("stopped pids %v of source-0 (front end %d, rank 0's core %d, rank 1's %d), want rank 1's core alone", got, front, core0, core1)
	}
	data, err := os.ReadFile(filepath.Join(out, "stalls.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"source": "source-0/rank1",
      "sid": %d,
      "members": [
        {
          "pid": %d,`, src.pid, core1); !strings.Contains(string(data), want) || !strings.Contains(string(data), `"part": true`) {
		t.Errorf("stalls.json during the stall does not hold rank 1's core alone (%s):\n%s", want, data)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd, time.Minute, log); code != 130 {
		t.Errorf("exit %d after SIGTERM, want 130\n%s", code, log)
	}
	t.Logf("p2pfault output:\n%s", tail(log.String(), 15))
	if got := stoppedOf(t, src.pid); len(got) != 0 {
		t.Errorf("pids %v of source-0 still stopped after the run's end", got)
	}
	if rec, err := os.ReadFile(filepath.Join(out, "stalls.json")); err != nil || !strings.Contains(string(rec), `"stalls": []`) {
		t.Errorf("stalls.json after the run: %v\n%s", err, rec)
	}
	if !strings.Contains(log.String(), "stall source-0/rank1") {
		t.Errorf("the headless output does not name the rank's stall:\n%s", log)
	}
	checkRunning(t, append([]simEngine{dec}, srcs...))
}

// TestAttachedSlice: `slice --attach` runs its rows one after another on
// the same attached engines (one arm): kill, then remove (short rows); the
// file says restore_at_end, so the removed source is started again at the
// end and every engine runs after the slice.
func TestAttachedSlice(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs an attached cluster for ~10 s")
	}
	bin := buildP2pfault(t)
	dec, srcs := attachedCluster(t, bin, 0.25)
	dir := t.TempDir()
	file := writeAttachFile(t, dir, dec, srcs, nil, "restore_at_end: true\n")
	out := filepath.Join(dir, "out")
	// Short rows: their verdicts are the virtual slice's to judge.
	cmd, log := startP2pfault(t, "slice", "--attach", file, "--cases", "kill,remove", "--time-scale", "0.25", "--quiet", "--out", out,
		"--fault-at", "4s", "--stall-for", "8s", "--recovery", "8s")
	if code := waitExit(t, cmd, 4*time.Minute, log); code != 0 && code != 1 {
		t.Fatalf("exit %d, want a verdict (0 or 1)\n%s", code, log)
	}
	t.Logf("slice output:\n%s", tail(log.String(), 12))
	for _, want := range []string{`main +kill +(pass|FAIL)`, `main +remove +(pass|FAIL)`, `slice: 2 rows`} {
		if !regexpMatch(`(?m)^`+want, log.String()) {
			t.Errorf("slice output has no %q", want)
		}
	}
	// The restarted engines' logs: the kill's restart, and the restore at
	// the end of the remove row.
	for _, f := range []string{"main-kill/attached-source-0.log", "main-remove/attached-source-0.log"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("slice output: %v", err)
		}
	}
	checkRunning(t, append([]simEngine{dec}, srcs...))
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

// TestAttachedSliceUsage: what a slice cannot do on one attached cluster
// is a usage error naming the flag.
func TestAttachedSliceUsage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "attach.yaml")
	if err := os.WriteFile(path, []byte("model: m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--arms", "main,fixed"}, "--attach: --arms main,fixed: an attached cluster is one arm"},
		{[]string{"--parallel", "2"}, "--attach: --parallel 2: the rows share the attached engines"},
		{[]string{"--cases", "remove,stall"}, "--attach: --cases remove,stall: remove must be the last case"},
		{[]string{"--p2p-port", "7777"}, "--attach: --p2p-port launch engines"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli.Main(append([]string{"slice", "--attach", path}, tt.args...), strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("slice %v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

// TestCleanupResumesAStallWhoseGuardDied: p2pfault and the stall's guard
// are both SIGKILLed during an attached stall, so the engine stays
// stopped; `p2pfault cleanup OUT` reads stalls.json and resumes it: the
// whole source's session, or the processes of the one rank stalled (rank
// 1's engine core of a DP source) alone.
func TestCleanupResumesAStallWhoseGuardDied(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an attached cluster")
	}
	bin := buildP2pfault(t)
	for _, tt := range []struct{ name, target string }{
		{"whole", "source-0"},
		{"rank", "source-0/rank1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var dec simEngine
			var srcs []simEngine
			stopped := func() []int { return stoppedOf(t, srcs[0].pid) }
			if tt.name == "rank" {
				dec, srcs = dpCluster(t, bin, 0.25)
			} else {
				dec, srcs = attachedCluster(t, bin, 0.25)
			}
			dir := t.TempDir()
			file := writeAttachFile(t, dir, dec, srcs, nil, "")
			out := filepath.Join(dir, "out")
			cmd, _ := startAttachedStall(t, file, out, tt.target, srcs[0])
			var rec struct {
				Stalls []struct {
					Source  string `json:"source"`
					Sid     int    `json:"sid"`
					Part    bool   `json:"part"`
					Members []struct {
						Pid int `json:"pid"`
					} `json:"members"`
					Guard struct {
						Pid int `json:"pid"`
					} `json:"guard"`
				} `json:"stalls"`
			}
			data, err := os.ReadFile(filepath.Join(out, "stalls.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &rec); err != nil || len(rec.Stalls) != 1 || rec.Stalls[0].Guard.Pid == 0 {
				t.Fatalf("stalls.json during the stall: %v\n%s", err, data)
			}
			s := rec.Stalls[0]
			if s.Source != tt.target || s.Sid != srcs[0].pid || s.Part != (tt.name == "rank") {
				t.Errorf("recorded stall %+v, want %s of session %d", s, tt.target, srcs[0].pid)
			}
			// What the stall stops: every process of the session, or rank
			// 1's engine core alone (not the front end, not rank 0's core).
			held, err := session.Live(srcs[0].pid)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(held)
			if tt.name == "rank" {
				held = []int{rankCore(t, srcs[0], 1)}
				if len(s.Members) != 1 || s.Members[0].Pid != held[0] {
					t.Errorf("recorded members %+v, want rank 1's core %d alone", s.Members, held[0])
				}
			}
			for deadline := time.Now().Add(5 * time.Second); !slices.Equal(stopped(), held); {
				if time.Now().After(deadline) {
					t.Fatalf("stopped %v, want %v", stopped(), held)
				}
				time.Sleep(5 * time.Millisecond)
			}
			gpid := s.Guard.Pid
			if err := syscall.Kill(gpid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for { // the guard is p2pfault's child: gone once p2pfault reaps it or dies
				if st, err := session.Stat(gpid); err != nil || !st.Live() {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			time.Sleep(500 * time.Millisecond)
			if now := stopped(); !slices.Equal(now, held) {
				t.Fatalf("with p2pfault and its guard gone, source-0's stopped pids are %v; want still %v for this test", now, held)
			}
			var stdout, stderr bytes.Buffer
			if code := cli.Main([]string{"cleanup", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("cleanup exit %d: %s%s", code, stdout.String(), stderr.String())
			}
			t.Logf("cleanup printed:\n%s", stdout.String())
			want := fmt.Sprintf("source-0: resumed session %d", srcs[0].pid)
			if tt.name == "rank" {
				want = fmt.Sprintf("source-0/rank1: resumed pids %v of session %d (the rest of it was not stalled)", held, srcs[0].pid)
			}
			if !strings.Contains(stdout.String(), want) || !strings.Contains(stdout.String(), "cleanup: resumed 1 stalled engine(s)") {
				t.Errorf("cleanup output does not say %q and the count", want)
			}
			if now := stopped(); len(now) != 0 {
				t.Errorf("pids %v of source-0 still stopped after cleanup, want running", now)
			}
			checkRunning(t, append([]simEngine{dec}, srcs...))
		})
	}
}

// dpCluster starts a decoder and one source of two data-parallel ranks
// (`sim serve --data-parallel-size 2`) with the plain build bin.
func dpCluster(t *testing.T, bin string, scale float64) (simEngine, []simEngine) {
	t.Helper()
	dec, w0 := launchSimEngine(t, bin, "decoder", scale)
	s0, w1 := launchSimEngine(t, bin, "source-0", scale, 2)
	w0()
	w1()
	return dec, []simEngine{s0}
}

// rankCore is the pid of rank r's engine core of e: the process on its
// P2P port base + r, in e's session.
func rankCore(t *testing.T, e simEngine, r int) int {
	t.Helper()
	l, err := attach.FindListener("127.0.0.1", e.p2p+r)
	if err != nil || l.Sid != e.pid || l.Pid == e.pid {
		t.Fatalf("rank %d of %s: %+v %v, want a core of session %d", r, e.name, l, err, e.pid)
	}
	return l.Pid
}

// stoppedOf are the pids of session sid in state T, in order.
func stoppedOf(t *testing.T, sid int) []int {
	t.Helper()
	ms, err := session.Members(sid)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, m := range ms {
		if m.Live() && m.Stopped() {
			out = append(out, m.Pid)
		}
	}
	slices.Sort(out)
	return out
}

// startAttachedStall starts `p2pfault run --attach file` whose timeline
// stalls target (source-0, or one rank of it: src) at 1 s and holds it,
// and returns once a process of src's session is stopped.
func startAttachedStall(t *testing.T, file, out, target string, src simEngine) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd, log := startP2pfault(t, "run", "--attach", file, "--headless", "--time-scale", "0.25", "--out", out,
		"--timeline", "at 1s stall "+target)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(sessiontest.States(t, src.pid), "T") {
		if time.Now().After(deadline) {
			t.Fatalf("%s was not stalled within 2 minutes\n%s", target, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd, log
}

// TestAttachedDecoderStall: an attach file lists two decoders under
// `decoders:` (local faults, each in a session of its own); `--decoders 2`
// agrees with it, and `stall decoder-1` stops decoder-1's session alone
// and resumes it: the decoder checks judge it, and every engine runs
// after. A --decoders the file does not agree with is a usage error.
func TestAttachedDecoderStall(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("runs an attached cluster of two decoders for ~10 s")
	}
	bin := buildP2pfault(t)
	var engines []simEngine
	var waits []func()
	for _, name := range []string{"decode-a", "decode-b", "source-0", "source-1"} {
		e, wait := launchSimEngine(t, bin, name, 0.25)
		engines, waits = append(engines, e), append(waits, wait)
	}
	for _, wait := range waits {
		wait()
	}
	decs, srcs := engines[:2], engines[2:]
	dir := t.TempDir()
	var list strings.Builder
	list.WriteString("decoders:\n")
	for _, d := range decs {
		fmt.Fprintf(&list, "  - name: %s\n    url: %s\n    p2p: %s\n    faults: local\n", d.name, d.url(), d.p2pAddr())
	}
	file := writeAttachFile(t, dir, decs[0], srcs, nil, "")
	text, _ := os.ReadFile(file)
	fixed := strings.Replace(string(text), "decoder:\n  url: "+decs[0].url()+"\n", list.String(), 1)
	if err := os.WriteFile(file, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}

	cmd, log := startP2pfault(t, "run", "--attach", file, "--decoders", "3", "--headless", "--out", filepath.Join(dir, "refused"),
		"--timeline", "at 1s stall decoder-1 for 4s")
	if code := waitExit(t, cmd, time.Minute, log); code != 2 || !strings.Contains(log.String(), "--decoders 3: the attach file "+file+" lists 2 decoder(s)") {
		t.Errorf("--decoders 3 on a file of two: exit %d, want 2 naming both counts:\n%s", code, tail(log.String(), 5))
	}

	cmd, log = startP2pfault(t, "run", "--attach", file, "--decoders", "2", "--headless", "--time-scale", "0.25",
		"--out", filepath.Join(dir, "out"), "--timeline", "at 10s stall decoder-1 for 4s", "--recovery", "8s")
	if code := waitExit(t, cmd, 3*time.Minute, log); code != 0 {
		t.Fatalf("exit %d, want 0 (every decoder check passed)\n%s", code, log)
	}
	t.Logf("p2pfault output:\n%s", tail(log.String(), 25))
	for _, want := range []string{"fault: stall decoder-1", "decoder-1 stopped (pid ", "fault: resume decoder-1",
		"check healthy_decoders_keep_hitting: pass", "check faulted_decoder_hits_again: pass"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the headless output does not say %q", want)
		}
	}
	if strings.Contains(log.String(), "source-0 stopped") || strings.Contains(log.String(), "decoder-0 stopped") {
		t.Error("an engine other than decoder-1 was stopped")
	}
	checkRunning(t, engines)
}
