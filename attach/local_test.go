package attach

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/attach/guard"
	"p2pfault/fault"
	"p2pfault/internal/sessiontest"
	"p2pfault/runner/session"
)

// threeEngines starts a decoder and two sources, each `sim serve` in a
// session of its own.
func threeEngines(t *testing.T) (engine, []engine) {
	t.Helper()
	dec := startEngine(t, "decoder")
	srcs := []engine{startEngine(t, "source-0"), startEngine(t, "source-1")}
	return dec, srcs
}

func openLocal(t *testing.T, path string, opts Options) *Cluster {
	t.Helper()
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(context.Background(), f, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLocalStallStopsEveryMemberAndResumeResumes(t *testing.T) {
	dec, srcs := threeEngines(t)
	dir := t.TempDir()
	book, err := guard.NewBook(filepath.Join(dir, guard.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	g, genv := guardArgv(t)
	c := openLocal(t, writeFile(t, dir, dec, srcs, nil), Options{LogDir: dir, Book: book, Guard: g, GuardEnv: genv, HealthTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	src, _ := c.Source("source-0")
	if !src.Local() {
		t.Fatal("a loopback source is not local by default")
	}

	r, err := src.Do(context.Background(), fault.ActionStall)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sid != srcs[0].pid || len(r.Pids) != 2 {
		t.Errorf("stalled session %d pids %v, want session %d with front end and core", r.Sid, r.Pids, srcs[0].pid)
	}
	if st := sessiontest.States(t, srcs[0].pid); st != "TT" {
		t.Errorf("source-0's processes in states %q after the stall, want every one T", st)
	}
	for _, other := range []engine{srcs[1], dec} {
		if st := sessiontest.States(t, other.pid); strings.Contains(st, "T") {
			t.Errorf("%s stopped too: %q", other.name, st)
		}
	}
	rec, err := guard.ReadRecord(book.Path())
	if err != nil || len(rec.Stalls) != 1 || rec.Stalls[0].Sid != srcs[0].pid || rec.Stalls[0].Guard.Pid == 0 {
		t.Errorf("stall record %+v (%v), want source-0's session with its guard", rec, err)
	}
	guardPid := rec.Stalls[0].Guard.Pid
	if err := src.Health(context.Background()); err == nil {
		t.Error("a stalled source answers /health")
	}

	if _, err := src.Do(context.Background(), fault.ActionResume); err != nil {
		t.Fatal(err)
	}
	if st := sessiontest.States(t, srcs[0].pid); strings.Contains(st, "T") || len(st) != 2 {
		t.Errorf("source-0's processes in states %q after the resume", st)
	}
	waitHealth(t, srcs[0].url(), 5*time.Second)
	if rec, _ := guard.ReadRecord(book.Path()); len(rec.Stalls) != 0 {
		t.Errorf("record still lists %+v after the resume", rec.Stalls)
	}
	// The released guard exits (it is our child: reaped by Release).
	if _, err := session.Stat(guardPid); err == nil {
		t.Errorf("guard pid %d still runs after the resume", guardPid)
	}
	if _, err := src.Do(context.Background(), fault.ActionResume); err == nil || !strings.Contains(err.Error(), "source-0: resume: source-0 is not stalled") {
		t.Errorf("second resume: %v", err)
	}
}

func TestCloseResumesAStallInForce(t *testing.T) {
	e := startEngine(t, "source-0")
	dir := t.TempDir()
	c := openLocal(t, writeFile(t, dir, fakeDecoder(t), []engine{e}, nil), Options{LogDir: dir})
	src, _ := c.Source("source-0")
	if _, err := src.Do(context.Background(), fault.ActionStall); err != nil {
		t.Fatal(err)
	}
	if st := sessiontest.States(t, e.pid); st != "TT" {
		t.Fatalf("states %q", st)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := sessiontest.States(t, e.pid); strings.Contains(st, "T") {
		t.Errorf("states %q after Close, want running", st)
	}
}

func procArgv(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	return splitNul(b)
}

func TestLocalKillRestartsFromProcOnTheSamePortsAndOutlivesTheCluster(t *testing.T) {
	dec, srcs := threeEngines(t)
	dir := t.TempDir()
	c := openLocal(t, writeFile(t, dir, dec, srcs, nil), Options{LogDir: dir, ReadyTimeout: 60 * time.Second})
	src, _ := c.Source("source-1")
	old := srcs[1]
	oldArgv := procArgv(t, old.pid)

	r, err := src.Do(context.Background(), fault.ActionKill)
	if r.NewPid > 0 {
		killSessionOnCleanup(t, r.NewPid) // the restarted engine's session id is its pid
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Sid != old.pid || r.NewPid == 0 || r.NewPid == old.pid {
		t.Fatalf("kill result %+v", r)
	}
	if live, _ := session.Live(old.pid); len(live) != 0 {
		t.Errorf("old session %d still has %v", old.pid, live)
	}
	rr, err := src.Do(context.Background(), fault.ActionReady)
	if err != nil {
		t.Fatal(err)
	}
	if rr.At.Before(r.At) {
		t.Errorf("ready at %v before the kill at %v", rr.At, r.At)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Restarted from its /proc: same argv, a session of its own, on the
	// same ports (the P2P listener is the new session's core).
	st, err := session.Stat(r.NewPid)
	if err != nil || st.Sid != r.NewPid {
		t.Fatalf("restarted leader %d: %+v %v, want a session of its own", r.NewPid, st, err)
	}
	if got := procArgv(t, r.NewPid); !slices.Equal(got, oldArgv) {
		t.Errorf("restarted as %q, want %q", got, oldArgv)
	}
	l, err := FindListener("127.0.0.1", old.p2p)
	if err != nil || l.Sid != r.NewPid {
		t.Errorf("P2P port %d held by %+v (%v), want session %d", old.p2p, l, err, r.NewPid)
	}
	if hl, err := FindListener("127.0.0.1", old.http); err != nil || hl.Sid != r.NewPid {
		t.Errorf("HTTP port %d held by %+v (%v), want session %d", old.http, hl, err, r.NewPid)
	}
	// Still running after the attach object is closed, logging to the folder.
	time.Sleep(200 * time.Millisecond)
	waitHealth(t, old.url(), 5*time.Second)
	if s := sessiontest.States(t, r.NewPid); len(s) != 2 || strings.ContainsAny(s, "TZ") {
		t.Errorf("restarted session's states %q", s)
	}
	logb, err := os.ReadFile(filepath.Join(dir, "attached-source-1.log"))
	if err != nil || !strings.Contains(string(logb), "p2pfault kill of source-1") || !strings.Contains(string(logb), "engine ready") {
		t.Errorf("restarted engine's log (%v):\n%s", err, logb)
	}
}

func TestLocalRemoveLeavesDownAndRestoreBringsBack(t *testing.T) {
	e := startEngine(t, "source-0")
	dir := t.TempDir()
	c := openLocal(t, writeFile(t, dir, fakeDecoder(t), []engine{e}, nil), Options{LogDir: dir, ReadyTimeout: 60 * time.Second, StopGrace: 5 * time.Second})
	src, _ := c.Source("source-0")
	if _, err := src.Do(context.Background(), fault.ActionRemove); err != nil {
		t.Fatal(err)
	}
	if live, _ := session.Live(e.pid); len(live) != 0 {
		t.Fatalf("removed session still has %v", live)
	}
	if !src.Removed() {
		t.Error("not marked removed")
	}
	if _, err := FindListener("127.0.0.1", e.p2p); err == nil {
		t.Error("P2P port still listened on after remove")
	}
	r, err := src.Do(context.Background(), fault.ActionRestore)
	if r.NewPid > 0 {
		killSessionOnCleanup(t, r.NewPid)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Do(context.Background(), fault.ActionReady); err != nil {
		t.Fatal(err)
	}
	if l, err := FindListener("127.0.0.1", e.p2p); err != nil || l.Sid != r.NewPid {
		t.Errorf("P2P port after restore: %+v %v", l, err)
	}
}

// TestSIGKILLDuringAStallResumesWithin2s: a p2pfault (a child of this
// test) stalls source-0, or rank 1 of a DP source-0, and is SIGKILLed;
// its guard resumes the session (the rank's core alone: the rest of it was
// never stopped).
func TestSIGKILLDuringAStallResumesWithin2s(t *testing.T) {
	for _, rank := range []string{"", "1"} {
		name := map[string]string{"": "whole", "1": "rank"}[rank]
		t.Run(name, func(t *testing.T) {
			var e engine
			var cores [2]int
			if rank != "" {
				e, cores = dpEngine(t, "source-0")
			} else {
				e = startEngine(t, "source-0")
			}
			dir := t.TempDir()
			path := writeFile(t, dir, fakeDecoder(t), []engine{e}, nil)
			want := "TT" // what the stall stops: every process of the session
			if rank != "" {
				giveRanks(t, path, 2)
				want = ""
				pids := []int{e.pid, cores[0], cores[1]}
				slices.Sort(pids)
				for _, pid := range pids {
					want += map[bool]string{true: "T", false: "S"}[pid == cores[1]]
				}
			}
			child, line := startChild(t, stallerEnv+"="+path, stallerSourceEnv+"=source-0", stallerRankEnv+"="+rank)
			var gpid int
			if f := strings.Fields(line); len(f) != 2 || f[0] != "stalled" {
				t.Fatalf("child said %q", line)
			} else {
				gpid, _ = strconv.Atoi(f[1])
			}
			if gpid <= 0 {
				t.Fatalf("no guard pid in %q", line)
			}
			t.Cleanup(func() {
				if st, err := session.Stat(gpid); err == nil && st.Sid == gpid {
					killSession(gpid)
				}
			})
			if st := stoppedLetters(t, e.pid); st != want {
				t.Fatalf("states %q after the child's stall, want %q (T: stopped)", st, want)
			}
			killed := time.Now()
			child.kill()
			for strings.Contains(sessiontest.States(t, e.pid), "T") {
				if time.Since(killed) > 2*time.Second {
					t.Fatalf("source-0 still stopped (%q) 2 s after p2pfault's SIGKILL", sessiontest.States(t, e.pid))
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("running again %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
			waitHealth(t, e.url(), 5*time.Second)
			// The guard exits once it has resumed (it is not ours to reap: poll
			// for it to leave the process table or become a zombie).
			deadline := time.Now().Add(5 * time.Second)
			for {
				st, err := session.Stat(gpid)
				if err != nil || !st.Live() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("guard %d still running", gpid)
				}
				time.Sleep(10 * time.Millisecond)
			}
			logb, _ := os.ReadFile(filepath.Join(dir, "guard-source-0.log"))
			said := "sent SIGCONT to session " + strconv.Itoa(e.pid)
			if rank != "" {
				said = fmt.Sprintf("source-0/rank1: sent SIGCONT to pids [%d] of session %d", cores[1], e.pid)
			}
			if !strings.Contains(string(logb), said) {
				t.Errorf("guard log does not say %q:\n%s", said, logb)
			}
		})
	}
}

// stoppedLetters is T or S for each live process of session sid in pid
// order: stopped or not.
func stoppedLetters(t *testing.T, sid int) string {
	t.Helper()
	ms, err := session.Members(sid)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(ms, func(a, b session.Proc) int { return a.Pid - b.Pid })
	var b strings.Builder
	for _, m := range ms {
		if m.Live() {
			b.WriteString(map[bool]string{true: "T", false: "S"}[m.Stopped()])
		}
	}
	return b.String()
}

// TestCleanupResumesWhatTheRecordSaysIsStopped: without a guard, a
// SIGKILLed p2pfault leaves its stall in the record, and ResumeRecorded
// (what `p2pfault cleanup` calls) resumes it.
func TestCleanupResumesWhatTheRecordSaysIsStopped(t *testing.T) {
	e := startEngine(t, "source-0")
	dir := t.TempDir()
	path := writeFile(t, dir, fakeDecoder(t), []engine{e}, nil)
	child, line := startChild(t, stallerEnv+"="+path, stallerSourceEnv+"=source-0", stallerNoGuardEnv+"=1")
	if line != "stalled 0" {
		t.Fatalf("child said %q", line)
	}
	t.Cleanup(func() { _, _ = guard.Continue(e.pid, nil, false) })
	rec := filepath.Join(dir, guard.RecordFile)
	// While the p2pfault that stalled it runs, cleanup leaves it alone.
	var out strings.Builder
	n, err := guard.ResumeRecorded(context.Background(), rec, &out, nil)
	if err != nil || n != 0 || !strings.Contains(out.String(), "which is still running; left alone") {
		t.Errorf("cleanup with the owner alive: %d %v %q", n, err, out.String())
	}
	child.kill()
	time.Sleep(300 * time.Millisecond)
	if st := sessiontest.States(t, e.pid); st != "TT" {
		t.Fatalf("states %q after SIGKILL without a guard, want still stopped", st)
	}
	out.Reset()
	n, err = guard.ResumeRecorded(context.Background(), rec, &out, nil)
	if err != nil || n != 1 {
		t.Fatalf("cleanup: %d %v %q", n, err, out.String())
	}
	if !strings.Contains(out.String(), "source-0: resumed session "+strconv.Itoa(e.pid)) {
		t.Errorf("cleanup said %q", out.String())
	}
	if st := sessiontest.States(t, e.pid); strings.Contains(st, "T") {
		t.Errorf("states %q after cleanup", st)
	}
	if r, _ := guard.ReadRecord(rec); len(r.Stalls) != 0 {
		t.Errorf("record keeps %+v", r.Stalls)
	}
	// A second cleanup has nothing left to do.
	out.Reset()
	if n, err := guard.ResumeRecorded(context.Background(), rec, &out, nil); n != 0 || err != nil {
		t.Errorf("second cleanup: %d %v %q", n, err, out.String())
	}
}

// TestReadyWaitsWithoutHoldingTheSource: a Ready wait (minutes for a real
// model load) does not block other actions on the source; here it waits
// on a stalled source and ends once the resume lets it answer.
func TestReadyWaitsWithoutHoldingTheSource(t *testing.T) {
	e := startEngine(t, "source-0")
	dir := t.TempDir()
	c := openLocal(t, writeFile(t, dir, fakeDecoder(t), []engine{e}, nil), Options{LogDir: dir, HealthTimeout: 100 * time.Millisecond, ReadyTimeout: 20 * time.Second})
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	src, _ := c.Source("source-0")
	if _, err := src.Do(context.Background(), fault.ActionStall); err != nil {
		t.Fatal(err)
	}
	type res struct {
		r   Result
		err error
	}
	ready := make(chan res, 1)
	go func() {
		r, err := src.Do(context.Background(), fault.ActionReady)
		ready <- res{r, err}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-ready:
		t.Fatalf("a stalled source was ready: %+v", r)
	default:
	}
	if !src.Stalled() {
		t.Fatal("not stalled")
	}
	resumed := time.Now()
	if _, err := src.Do(context.Background(), fault.ActionResume); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ready:
		if r.err != nil || r.r.At.Before(resumed) {
			t.Errorf("ready %+v %v, want after the resume at %v", r.r, r.err, resumed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not ready 10 s after the resume")
	}
}

// TestKilledSourceOutlivesTheP2pfaultThatRestartedIt: a p2pfault (a child
// of this test) kills source-0, restarts it from /proc and is SIGKILLed:
// the restarted engine keeps running and answering.
func TestKilledSourceOutlivesTheP2pfaultThatRestartedIt(t *testing.T) {
	e := startEngine(t, "source-0")
	dir := t.TempDir()
	path := writeFile(t, dir, fakeDecoder(t), []engine{e}, nil)
	child, line := startChild(t, stallerEnv+"="+path, stallerSourceEnv+"=source-0", actionEnv+"=kill")
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "restarted" {
		t.Fatalf("child said %q", line)
	}
	pid, _ := strconv.Atoi(f[1])
	killSessionOnCleanup(t, pid)
	child.kill()
	time.Sleep(300 * time.Millisecond)
	if st := sessiontest.States(t, pid); len(st) != 2 || strings.ContainsAny(st, "TZ") {
		t.Fatalf("restarted session %d in states %q after its p2pfault died", pid, st)
	}
	waitHealth(t, e.url(), 5*time.Second)
	if l, err := FindListener("127.0.0.1", e.p2p); err != nil || l.Sid != pid {
		t.Errorf("P2P port: %+v %v", l, err)
	}
}
