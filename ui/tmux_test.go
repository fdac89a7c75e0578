package ui

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The end-to-end test drives the real p2pfault binary in tmux. TestMain
// builds it once, only when that test is selected and tmux is there, and
// hands its path (or the build error) over in the environment.
const (
	envBin      = "P2PFAULT_UI_E2E_BIN"
	envBuildErr = "P2PFAULT_UI_E2E_BUILD_ERROR"
)

// tmuxTests are the tests that drive the binary in tmux: TestMain builds
// it when one of them is selected.
var tmuxTests = []string{
	"TestDashboardInTmuxStallResumeQuit",
	"TestDashboardInTmuxRankPicker",     // rank_tmux_test.go
	"TestReplayInTmux",                  // replay_tmux_test.go
	"TestDashboardInTmuxClosedTerminal", // hangup_tmux_test.go
}

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "p2pfault-ui-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "ui tests: temp dir:", err)
		os.Exit(2)
	}
	if e2eSelected() {
		bin := filepath.Join(dir, "p2pfault")
		if err := buildBinary(bin); err != nil {
			os.Setenv(envBuildErr, err.Error())
		} else {
			os.Setenv(envBin, bin)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// e2eSelected reports whether the tmux test will run, so other runs
// (-run of one test, benchmarks, -short, no tmux) do not pay for a build.
func e2eSelected() bool {
	if testing.Short() {
		return false
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		return false
	}
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	re, err := regexp.Compile(strings.Split(f.Value.String(), "/")[0])
	return err == nil && slices.ContainsFunc(tmuxTests, re.MatchString)
}

// e2eBinary is the binary TestMain built, or skips the test when it
// cannot run here (-short, no tmux); what is what the test needs it for.
func e2eBinary(t *testing.T, what string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s runs the binary in tmux", what)
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skipf("tmux is not on PATH: %s needs it (CI installs it)", what)
	}
	if msg := os.Getenv(envBuildErr); msg != "" {
		t.Fatal(msg)
	}
	bin := os.Getenv(envBin)
	if bin == "" {
		t.Fatal("TestMain did not build the binary")
	}
	return bin
}

// buildBinary builds the module's main package (one folder up) to bin.
func buildBinary(bin string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build p2pfault: no go tool on PATH: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build p2pfault: %w\n%s", err, out)
	}
	return nil
}

// tmuxPane is one detached tmux session on a private server socket, so the
// test never touches anyone else's tmux.
type tmuxPane struct {
	t      *testing.T
	socket string
	name   string
}

// startPane starts script in a w×h detached session of its own socket
// (prefix, the pid and the time name it), killed with its server when the
// test ends.
func startPane(t *testing.T, prefix, name string, w, h int, script string) tmuxPane {
	t.Helper()
	pane := tmuxPane{t: t, socket: fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano()), name: name}
	var path string // the server's socket file, which kill-server leaves behind
	t.Cleanup(func() {
		_, _ = pane.tmux("kill-session", "-t", pane.name)
		_, _ = pane.tmux("kill-server")
		if path != "" {
			_ = os.Remove(path)
		}
	})
	if _, err := pane.tmux("new-session", "-d", "-s", name, "-x", strconv.Itoa(w), "-y", strconv.Itoa(h), "sh", "-c", script); err != nil {
		t.Fatal(err)
	}
	if out, err := pane.tmux("display-message", "-p", "-t", name, "#{socket_path}"); err == nil {
		path = strings.TrimSpace(out)
	}
	return pane
}

func (p tmuxPane) tmux(args ...string) (string, error) {
	full := append([]string{"-L", p.socket, "-f", "/dev/null"}, args...)
	out, err := exec.Command("tmux", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (p tmuxPane) send(keys ...string) {
	p.t.Helper()
	if _, err := p.tmux(append([]string{"send-keys", "-t", p.name}, keys...)...); err != nil {
		p.t.Fatal(err)
	}
}

func (p tmuxPane) screen() string {
	out, err := p.tmux("capture-pane", "-p", "-t", p.name)
	if err != nil {
		return err.Error()
	}
	return out
}

// waitFor polls the screen until cond holds; it never sleeps blind.
func (p tmuxPane) waitFor(what string, timeout time.Duration, cond func(screen string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		last = p.screen()
		if cond(last) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("waited %v for %s; the screen:\n%s", timeout, what, last)
	return ""
}

// paneWidth is the tmux window's width; with two sources each panel is
// half of it, source-0 on the left.
const paneWidth = 120

// panelLines is source i's part of each line of the screen, trimmed.
func panelLines(screen string, i int) []string {
	var out []string
	for _, line := range strings.Split(screen, "\n") {
		r := []rune(line)
		from, to := min(len(r), i*paneWidth/2), min(len(r), (i+1)*paneWidth/2)
		out = append(out, strings.TrimSpace(string(r[from:to])))
	}
	return out
}

// panelFigure reads a figure of source i's panel: re on the line whose
// panel part starts with prefix. ok is false while the panel shows none
// (no pulls in the window).
func panelFigure(screen string, i int, prefix string, re *regexp.Regexp) (float64, bool) {
	for _, part := range panelLines(screen, i) {
		if !strings.HasPrefix(part, prefix) {
			continue
		}
		m := re.FindStringSubmatch(part)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return v, err == nil
	}
	return 0, false
}

var (
	maxLatencyRe = regexp.MustCompile(`max (\d+(?:\.\d+)?)s`)
	hitRateRe    = regexp.MustCompile(`hits\s+(\d+)%`)
)

// hitRate is source i's hit rate over the rolling window, in percent.
func hitRate(screen string, i int) (float64, bool) { return panelFigure(screen, i, "hits", hitRateRe) }

// maxLatency is source i's slowest pull over the rolling window, in seconds.
func maxLatency(screen string, i int) (float64, bool) {
	return panelFigure(screen, i, "p50", maxLatencyRe)
}

// sessionsRecord is the part of the run's sessions.json this test reads.
type sessionsRecord struct {
	Owner   procRecord     `json:"owner"`
	Engines []engineRecord `json:"engines"`
}

// engineRecord is one engine's process session: its leader, the session
// id and every member (a data-parallel engine's front end and cores).
type engineRecord struct {
	Engine     string       `json:"engine"`
	Pid        int          `json:"pid"`
	Sid        int          `json:"sid"`
	StartTicks uint64       `json:"start_ticks"`
	Members    []procRecord `json:"members"`
}

type procRecord struct {
	Pid        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
}

func readSessions(dir string) (sessionsRecord, error) {
	var rec sessionsRecord
	b, err := os.ReadFile(filepath.Join(dir, "sessions.json"))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("parse %s: %w", filepath.Join(dir, "sessions.json"), err)
	}
	return rec, nil
}

// procStat is what /proc/PID/stat says of a process that still exists.
type procStat struct {
	state      string
	sid        int
	startTicks uint64
}

func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// The command name may hold spaces and parentheses: fields start
	// after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	sid, _ := strconv.Atoi(f[3])
	ticks, _ := strconv.ParseUint(f[19], 10, 64)
	return procStat{state: f[0], sid: sid, startTicks: ticks}, true
}

// alive reports whether the recorded process still runs (a zombie does not).
func (r procRecord) alive() bool {
	st, ok := readProcStat(r.Pid)
	return ok && st.startTicks == r.StartTicks && st.state != "Z" && st.state != "X"
}

// sessionMembers lists live processes whose session id is sid.
func sessionMembers(sid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok && st.sid == sid && st.state != "Z" && st.state != "X" {
			out = append(out, pid)
		}
	}
	return out
}

// runProcs are the processes of one `p2pfault run` a test started: every
// engine session and the p2pfault process seen in its sessions.json, so
// cleanup can end them by session id and pid if the test fails, and the
// test can check none is left after q.
type runProcs struct {
	out  string // the run's --out folder
	seen sessionsRecord
}

// watchRun tracks the run writing its sessions.json to out; cleanup ends
// whatever of it is still alive.
func watchRun(t *testing.T, out string) *runProcs {
	rp := &runProcs{out: out}
	t.Cleanup(func() {
		rp.note()
		for _, e := range rp.seen.Engines {
			if (procRecord{Pid: e.Pid, StartTicks: e.StartTicks}).alive() {
				_ = syscall.Kill(-e.Sid, syscall.SIGKILL)
			}
		}
		if rp.seen.Owner.Pid > 0 && rp.seen.Owner.alive() {
			_ = syscall.Kill(rp.seen.Owner.Pid, syscall.SIGKILL)
		}
	})
	return rp
}

// note adds the engines sessions.json lists now (a restart's new ones
// too) to those seen; it returns what it read.
func (rp *runProcs) note() (sessionsRecord, error) {
	rec, err := readSessions(rp.out)
	if err != nil {
		return rec, err
	}
	if rec.Owner.Pid > 0 {
		rp.seen.Owner = rec.Owner
	}
	rp.seen.Engines = append(rp.seen.Engines, rec.Engines...)
	return rec, nil
}

// left lists the processes seen that still run: engines, their members,
// anything in their sessions, p2pfault itself.
func (rp *runProcs) left() []string {
	var left []string
	for _, e := range rp.seen.Engines {
		procs := append([]procRecord{{Pid: e.Pid, StartTicks: e.StartTicks}}, e.Members...)
		for _, p := range procs {
			if p.alive() {
				left = append(left, fmt.Sprintf("%s pid %d", e.Engine, p.Pid))
			}
		}
		if m := sessionMembers(e.Sid); len(m) > 0 {
			left = append(left, fmt.Sprintf("%s session %d: pids %v", e.Engine, e.Sid, m))
		}
	}
	if rp.seen.Owner.alive() {
		left = append(left, fmt.Sprintf("p2pfault pid %d", rp.seen.Owner.Pid))
	}
	return left
}

// startDashboard runs `p2pfault run` with args on the simulated cluster
// in a paneWidth×40 pane, its run folder tracked; it waits until both
// sources are READY and hitting. NO_COLOR keeps the captured text plain.
func startDashboard(t *testing.T, bin, prefix string, wait time.Duration, args ...string) (tmuxPane, *runProcs) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	rp := watchRun(t, out)
	cmd := fmt.Sprintf("NO_COLOR=1 %q run --free-ports --out %q", bin, out)
	for _, a := range args {
		cmd += " " + strconv.Quote(a)
	}
	pane := startPane(t, prefix, "dash", paneWidth, 40, cmd+`; echo "p2pfault exited $?"; exec sleep 600`)
	pane.waitFor("both sources to show hits", wait, func(s string) bool {
		h0, ok0 := hitRate(s, 0)
		h1, ok1 := hitRate(s, 1)
		return strings.Count(s, "READY") == 2 && ok0 && ok1 && h0 > 0 && h1 > 0
	})
	return pane, rp
}

// quitAndCheck presses q and checks p2pfault exits 0 or 1 leaving none of
// the processes seen alive.
func quitAndCheck(t *testing.T, pane tmuxPane, rp *runProcs, wait time.Duration) {
	t.Helper()
	rp.note()
	pane.send("q")
	pane.waitFor("p2pfault to exit", wait, func(s string) bool { return strings.Contains(s, "p2pfault exited") })
	if left := rp.left(); len(left) > 0 {
		t.Errorf("processes left after q: %s", strings.Join(left, "; "))
	}
	if err := checkExitLine(pane.screen()); err != nil {
		t.Error(err)
	}
}

func TestDashboardInTmuxStallResumeQuit(t *testing.T) {
	bin := e2eBinary(t, "the end-to-end dashboard test")
	const wait = 90 * time.Second // generous: two shared cores, others compiling
	// Time compressed 5×: the stall's lookup deadline is 1.6 s, the
	// handshake timeout 6 s.
	pane, rp := startDashboard(t, bin, "p2pfault-ui", wait, "--time-scale", "0.2")
	if rec, err := rp.note(); err != nil || len(rec.Engines) != 3 {
		t.Fatalf("sessions.json while running: %v, %d engines (want 3)", err, len(rec.Engines))
	}

	pane.send("s")
	pane.waitFor("source-0 STALLED with its latency over 1s (wait mode)", wait, func(s string) bool {
		v, ok := maxLatency(s, 0)
		return strings.Contains(s, "source-0  STALLED") && ok && v >= 1.0
	})

	pane.send("c")
	pane.waitFor("source-0 READY and hitting again", wait, func(s string) bool {
		v, ok := hitRate(s, 0)
		return strings.Contains(s, "▶ source-0  READY") && ok && v > 0
	})
	quitAndCheck(t, pane, rp, wait)
}

// checkExitLine checks p2pfault exited with a code the design allows after
// a key-fired fault and q: 0 (bounds held) or 1 (a bound failed).
func checkExitLine(screen string) error {
	m := regexp.MustCompile(`p2pfault exited (\d+)`).FindStringSubmatch(screen)
	if m == nil {
		return errors.New("no exit line on the screen")
	}
	if m[1] != "0" && m[1] != "1" {
		return fmt.Errorf("p2pfault exited %s after q, want 0 or 1; the screen:\n%s", m[1], screen)
	}
	return nil
}
