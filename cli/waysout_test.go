package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/attach"
	"p2pfault/cli"
	"p2pfault/fault"
	"p2pfault/internal/sessiontest"
	"p2pfault/internal/syncbuf"
	"p2pfault/netfault"
)

// wayOut is one way a run ends before its time: how it is ended, the exit
// code and stderr line that say so, and whether `p2pfault cleanup` is
// needed after it (SIGKILL: nothing in the process can undo anything).
type wayOut struct {
	name    string
	end     func(t *testing.T, r *heldRun)
	code    int
	said    string
	cleanup bool
}

func signalWay(name string, sig syscall.Signal, said string) wayOut {
	return wayOut{name: name, code: 130, said: said, end: func(t *testing.T, r *heldRun) {
		if err := r.cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}}
}

// waysOut are the ways out of the table in docs/exit-codes.md.
func waysOut() []wayOut {
	return []wayOut{
		signalWay("SIGINT", syscall.SIGINT, "p2pfault: interrupted by SIGINT (Ctrl-C)"),
		signalWay("SIGTERM", syscall.SIGTERM, "p2pfault: interrupted by SIGTERM (kill or a service manager)"),
		signalWay("SIGHUP", syscall.SIGHUP, "p2pfault: interrupted by SIGHUP (the terminal closed)"),
		signalWay("SIGQUIT", syscall.SIGQUIT, "p2pfault: interrupted by SIGQUIT (Ctrl-\\)"),
		{name: "closed stdout", code: 130, said: "p2pfault: interrupted: stdout closed (write /dev/stdout: broken pipe)",
			// The reader goes away, as `| grep -m1` does once it matched:
			// p2pfault's next line fails with EPIPE (SIGPIPE unhandled
			// would kill it there).
			end: func(t *testing.T, r *heldRun) { r.closeStdout() }},
		{name: "SIGKILL then cleanup", code: -1, cleanup: true, end: func(t *testing.T, r *heldRun) {
			if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}},
	}
}

// heldRun is a p2pfault run started by a test with its stdout on a pipe
// the test reads (and may close) and its stderr in a buffer.
type heldRun struct {
	cmd    *exec.Cmd
	out    string
	stdout *os.File
	log    syncbuf.Buffer // stdout's lines as read
	stderr syncbuf.Buffer
	read   chan struct{} // closed once the stdout reader returned
}

// startHeld starts the test binary as p2pfault with args in a process
// group of its own, killed with its group if the test ends first.
func startHeld(t *testing.T, out string, args ...string) *heldRun {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &heldRun{out: out, stdout: pr, read: make(chan struct{})}
	r.cmd = exec.Command(self, append(args, "--out", out)...)
	r.cmd.Env = append(os.Environ(), "P2PFAULT_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0")
	r.cmd.Stdout, r.cmd.Stderr = pw, &r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close() // the child holds the only write end
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			_ = r.cmd.Wait()
		}
		r.closeStdout()
		// A test that failed before its way out (or a way out that
		// failed) leaves the table the record names: not the host's.
		for _, rec := range recordedTables(t, out) {
			_, _ = netfault.DeleteTable(rec.Table)
		}
	})
	go func() {
		defer close(r.read)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			_, _ = r.log.Write(append(sc.Bytes(), '\n'))
		}
	}()
	return r
}

// closeStdout closes the read end of p2pfault's stdout.
func (r *heldRun) closeStdout() {
	_ = r.stdout.Close()
	<-r.read
}

func (r *heldRun) String() string { return r.log.String() + "\nstderr:\n" + r.stderr.String() }

// waitHeld waits until every fault of want is in force: its verification
// event says it took effect (stall, partition, busy), or, for a loss
// (which has none), sessions.json names it in force and its table is in
// the kernel.
func (r *heldRun) waitHeld(t *testing.T, verified []string, firewall []string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if r.verified(verified) && r.firewallHeld(t, firewall) {
			return
		}
		time.Sleep(100 * time.Millisecond) // each look reads the whole events file
	}
	t.Fatalf("the faults %v and %v were not all in force within %v\n%s", verified, firewall, limit, r)
}

// verified says whether the events hold a verified verification of every
// want ("ACTION TARGET"); for a busy load, a verification either way. The
// load runs from its start whatever its check saw, and that check reads the
// engine's /metrics within 2 s of the real clock, which a loaded machine
// can miss (CI, under load: "the /metrics of source-4: no answer within
// 1s"); what the ways out are asked is that the load stops with the run.
func (r *heldRun) verified(want []string) bool {
	f, err := os.Open(filepath.Join(r.out, "events.jsonl"))
	if err != nil {
		return false
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Verification *struct {
				Action   string `json:"action"`
				Source   int    `json:"source"`
				Target   string `json:"target"`
				Verified bool   `json:"verified"`
			} `json:"verification"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Verification == nil {
			continue
		}
		if !ev.Verification.Verified && ev.Verification.Action != fault.ActionBusy {
			continue
		}
		v := ev.Verification
		target := v.Target
		if target == "" {
			target = "source-" + strconv.Itoa(v.Source)
		}
		seen[v.Action+" "+target] = true
	}
	for _, w := range want {
		if !seen[w] {
			return false
		}
	}
	return true
}

// firewallHeld says whether sessions.json names every want in force and
// the table is in the kernel (deleted when the test ends, whatever left it).
func (r *heldRun) firewallHeld(t *testing.T, want []string) bool {
	if len(want) == 0 {
		return true
	}
	recs := recordedTables(t, r.out)
	if len(recs) != 1 {
		return false
	}
	for _, w := range want {
		if !slices.Contains(recs[0].Faults, w) {
			return false
		}
	}
	names, _ := netfault.Tables()
	return slices.Contains(names, recs[0].Table)
}

// TestEveryWayOutUndoesEveryKindOfHostState is the table of ways out ×
// kinds of host state: one run of five sources of two ranks each holds
// at once a stopped rank (stall source-0/rank1), a stopped session
// (stall source-1), a partition (source-2), a loss (source-3) and a busy
// load (source-4), none of which would end by itself before the test does;
// once all are in force the run is ended by one way out. After each: the
// exit code and stderr line of that way out, no process of the run's
// engine sessions alive (stopped or not), the run's firewall table gone
// from the kernel and from sessions.json, and, but after a SIGKILL, the
// reports written and the busy load's final record (it stopped with the
// run). After a SIGKILL `p2pfault cleanup DIR` deletes the table the run
// could not.
func TestEveryWayOutUndoesEveryKindOfHostState(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster of 16 engine processes once per way out (~5 s each)")
	}
	timeline := "at 1s stall source-0/rank1 for 600s; at 1s stall source-1 for 600s; at 1s busy source-4 for 600s"
	verified := []string{"stall source-0/rank1", "stall source-1", "busy source-4"}
	var firewall []string
	if err := netfault.Check("this test"); err != nil {
		t.Logf("the partition and loss cells are skipped: network faults need the firewall, which this process cannot change: %v", err)
	} else {
		timeline += "; at 1s partition source-2 for 600s; at 1s loss 30% source-3 for 600s"
		verified = append(verified, "partition source-2")
		firewall = []string{"partition source-2", "loss 30% source-3"}
	}
	for _, way := range waysOut() {
		t.Run(way.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			r := startHeld(t, out, "run", "--headless", "--free-ports", "--sources", "5", "--source-dp", "2",
				"--time-scale", "0.25", "--engine-arg=--sim-startup-delay=0s", "--timeline", timeline)
			r.waitHeld(t, verified, firewall, 2*time.Minute)
			table := ""
			if recs := recordedTables(t, out); len(recs) == 1 {
				table = recs[0].Table
				t.Cleanup(func() { _, _ = netfault.DeleteTable(table) })
			}
			pids := sessionPids(t, out)
			if len(pids) < 16 {
				t.Fatalf("%d engine processes in the run's sessions, want 16 (6 front ends, 10 cores)\n%s", len(pids), r)
			}
			way.end(t, r)
			if code := waitExitCode(t, r.cmd, time.Minute, r); code != way.code {
				t.Errorf("exit %d, want %d\n%s", code, way.code, r)
			}
			if way.said != "" && !strings.Contains(r.stderr.String(), way.said+"\n") {
				t.Errorf("stderr does not say %q:\n%s", way.said, r.stderr.String())
			}
			if way.cleanup && table != "" {
				if names, _ := netfault.Tables(); !slices.Contains(names, table) {
					t.Errorf("table %s is gone before cleanup: nothing shows cleanup deletes it", table)
				}
			}
			if way.cleanup {
				var stdout, stderr strings.Builder
				if code := cli.Main([]string{"cleanup", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
					t.Errorf("cleanup: exit %d\n%s%s", code, stdout.String(), stderr.String())
				}
			}
			assertNothingLeft(t, out, pids, table)
			if !way.cleanup {
				assertRecordedEnd(t, out, way.said)
			}
		})
	}
}

// waitExitCode waits for p2pfault and returns its exit code (-1: killed
// by a signal).
func waitExitCode(t *testing.T, cmd *exec.Cmd, limit time.Duration, log fmt.Stringer) int {
	t.Helper()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("p2pfault did not end in %v\n%s", limit, log)
	}
	return 0
}

// assertNothingLeft: within 5 s no process of pids is alive (a SIGKILLed
// p2pfault's engines die of their parent-death signal, stopped ones too),
// and the run's firewall table is neither in the kernel nor recorded.
func assertNothingLeft(t *testing.T, out string, pids []int, table string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(alivePids(pids)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range alivePids(pids) {
		_, state, _ := procSession(p)
		t.Errorf("engine process %d is alive (state %s) after the way out", p, state)
	}
	if table != "" {
		assertTableGone(t, table, "after the way out")
	}
	if recs := recordedTables(t, out); len(recs) != 0 {
		t.Errorf("sessions.json still names %v", recs)
	}
}

// assertRecordedEnd: the run wrote its reports, its events end with exit
// 130 and the way out's words, and the busy load's last record is final
// (the load stopped with the run).
func assertRecordedEnd(t *testing.T, out, said string) {
	t.Helper()
	for _, f := range []string{"report.md", "report.json", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("no %s after the way out: %v", f, err)
		}
	}
	var end, load struct {
		Message  string `json:"message"`
		ExitCode int    `json:"exit_code"`
		Load     *struct {
			Final bool `json:"final"`
		} `json:"load"`
	}
	for _, ev := range eventsOf(t, filepath.Join(out, "events.jsonl")) {
		b, _ := json.Marshal(ev)
		switch ev.Kind {
		case "end":
			_ = json.Unmarshal(b, &end)
		case "load":
			_ = json.Unmarshal(b, &load)
		}
	}
	if want := strings.TrimPrefix(said, "p2pfault: "); end.ExitCode != 130 || end.Message != want {
		t.Errorf("end event: exit %d %q, want 130 %q", end.ExitCode, end.Message, want)
	}
	if load.Load == nil || !load.Load.Final {
		t.Errorf("the busy load's last record is not final: %+v", load.Load)
	}
}

// TestEveryWayOutLeavesAnAttachedClusterRunning is the attached column of
// the table: a cluster the test started (a decoder and three sources, each
// in a session of its own) is attached; the run kills source-0, which
// p2pfault restarts from /proc for its owner, stalls source-1 with no end
// and makes source-2 busy. Once source-0 answers again from its new
// session and the stall and the load took effect, the run is ended by each
// way out. After each: every engine runs (none in state T) and answers,
// the restarted source-0 included, and source-2's queues are empty and
// stay so (no request of the load is left or still being sent).
func TestEveryWayOutLeavesAnAttachedClusterRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an attached cluster, one run per way out (~6 s each)")
	}
	bin := buildP2pfault(t)
	const scale = 0.25
	dec, w0 := launchSimEngine(t, bin, "decoder", scale)
	var srcs []simEngine
	waits := []func(){w0}
	for _, name := range []string{"source-0", "source-1", "source-2"} {
		s, w := launchSimEngine(t, bin, name, scale)
		srcs, waits = append(srcs, s), append(waits, w)
	}
	for _, w := range waits {
		w()
	}
	file := writeAttachFile(t, t.TempDir(), dec, srcs, nil, "")
	for _, way := range waysOut() {
		t.Run(way.name, func(t *testing.T) {
			was, err := attach.FindListener("127.0.0.1", srcs[0].p2p)
			if err != nil {
				t.Fatalf("source-0 does not listen before the run: %v", err)
			}
			out := filepath.Join(t.TempDir(), "run")
			r := startHeld(t, out, "run", "--attach", file, "--headless", "--time-scale", "0.25",
				"--timeline", "at 1s kill source-0; at 1s stall source-1; at 1s busy source-2 for 600s")
			r.waitHeld(t, []string{"stall source-1", "busy source-2"}, nil, 2*time.Minute)
			waitRestarted(t, srcs[0], was.Sid, r)
			way.end(t, r)
			if code := waitExitCode(t, r.cmd, time.Minute, r); code != way.code {
				t.Errorf("exit %d, want %d\n%s", code, way.code, r)
			}
			if way.said != "" && !strings.Contains(r.stderr.String(), way.said+"\n") {
				t.Errorf("stderr does not say %q:\n%s", way.said, r.stderr.String())
			}
			if way.cleanup {
				// The guard resumed the stall when p2pfault died; cleanup
				// finds the record and nothing left to undo.
				waitRunning(t, srcs[1], 2*time.Second)
				var stdout, stderr strings.Builder
				if code := cli.Main([]string{"cleanup", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
					t.Errorf("cleanup: exit %d\n%s%s", code, stdout.String(), stderr.String())
				}
			} else {
				assertRecordedEnd(t, out, way.said)
			}
			checkRunning(t, append([]simEngine{dec}, srcs...))
			assertLoadGone(t, srcs[2])
		})
	}
}

// waitRestarted waits until e answers /health from a session other than
// was: p2pfault killed it and restarted it.
func waitRestarted(t *testing.T, e simEngine, was int, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if l, err := attach.FindListener("127.0.0.1", e.p2p); err == nil && l.Sid != was && answers(e.url()) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s was not restarted (answering from a session other than %d) within a minute\n%s", e.name, was, log)
}

// waitRunning waits until no process of e's session is stopped.
func waitRunning(t *testing.T, e simEngine, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for strings.Contains(sessiontest.States(t, e.pid), "T") {
		if time.Now().After(deadline) {
			t.Fatalf("%s is still stopped %v after p2pfault died", e.name, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// assertLoadGone: within 5 s e runs and queues no request, and in the
// second after that it is sent no prompt token: nothing still sends the
// busy load.
func assertLoadGone(t *testing.T, e simEngine) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := metricsOf(t, e)
		if m["vllm:num_requests_running"]+m["vllm:num_requests_waiting"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs %v and queues %v requests 5 s after the run ended", e.name, m["vllm:num_requests_running"], m["vllm:num_requests_waiting"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := metricsOf(t, e)["vllm:prompt_tokens_total"]
	time.Sleep(time.Second)
	if after := metricsOf(t, e)["vllm:prompt_tokens_total"]; after != before {
		t.Errorf("%s was sent %v prompt tokens in the second after the run had ended: a load still runs", e.name, after-before)
	}
}

// metricsOf reads e's /metrics: each sample's value by its name, summed
// over labels.
func metricsOf(t *testing.T, e simEngine) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := c.Get(e.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{")
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			m[name] += v
		}
	}
	return m
}

// closingStdout is a stdout whose reader goes away once it has been
// shown line: every later write fails with EPIPE, as a pipe's does after
// `grep -m1 line` exits.
type closingStdout struct {
	line   string
	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
}

func (w *closingStdout) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return 0, syscall.EPIPE
	}
	w.buf.Write(p)
	w.closed = strings.Contains(w.buf.String(), w.line)
	return len(p), nil
}

// TestAClosedStdoutEndsTheRun: on the virtual cluster (the fake clock) a
// headless stall of 10 minutes whose stdout's reader goes away after the
// "verified: stall" line ends at once as interrupted: exit 130, stderr
// naming the closed stdout, the stall resumed and the reports written.
// Without the watch the run would go on printing into nothing for its ten
// minutes.
func TestAClosedStdoutEndsTheRun(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	out := t.TempDir()
	stdout := &closingStdout{line: "verified: stall source-0 took effect"}
	var stderr bytes.Buffer
	var code int
	var took time.Duration
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		code = cli.Execute(context.Background(), []string{"run", "--headless", "--engine", "virtual", "--case", "stall",
			"--stall-for", "10m", "--out", out}, strings.NewReader(""), stdout, &stderr)
		took = time.Since(start)
	})
	if code != 130 {
		t.Fatalf("exit %d, want 130\nstdout:\n%s\nstderr:\n%s", code, stdout.buf.String(), stderr.String())
	}
	if want := "p2pfault: interrupted: stdout closed (broken pipe)\n"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
	}
	// The fault fires at 10 s and is verified within a second; the next
	// line (the next second's) fails and ends the run.
	if took > 15*time.Second {
		t.Errorf("the run went on for %v on the fake clock after its stdout closed", took)
	}
	evs := eventsOf(t, filepath.Join(out, "events.jsonl"))
	var resumed bool
	for _, ev := range evs {
		if ev.Fault != nil && ev.Fault.Action == "resume" {
			resumed = true
		}
	}
	if !resumed {
		t.Error("no resume of the stall in the events")
	}
	if end := evs[len(evs)-1]; end.Kind != "end" || end.ExitCode != 130 {
		t.Errorf("last event %+v, want the end with exit 130", end)
	}
	if _, err := os.Stat(filepath.Join(out, "report.md")); err != nil {
		t.Errorf("no report.md: %v", err)
	}
}
