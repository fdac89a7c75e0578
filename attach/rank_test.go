package attach

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/attach/guard"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/internal/sessiontest"
	"p2pfault/runner/session"
)

// unopened is the cluster of an attach file as Open makes it, without
// Open's checks (nothing runs: the plan and the refusals are asked only).
func unopened(t *testing.T, file string) *Cluster {
	t.Helper()
	f, err := Parse("a.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{file: f}
	for i := range f.Sources {
		tg := newTarget(f.Sources[i], Options{}.withDefaults(), "source", i)
		if tg.Local() {
			tg.faulter = &localFaulter{t: tg}
		} else {
			tg.faulter = &commandFaulter{t: tg}
		}
		c.sources = append(c.sources, tg)
	}
	return c
}

// TestRankStepsOfAnAttachedSource: which steps on one rank (and on the
// whole source) an attached source takes, asked before the run: a command
// with {rank} acts on one rank and one without on the whole source, each
// refused on the other grain with words saying so; a local source takes
// every kind it takes whole on a rank, its network kinds on the rank's
// own P2P port; the dashboard's key on a rank is refused with the same
// words as the timeline.
func TestRankStepsOfAnAttachedSource(t *testing.T) {
	file := "model: m\ndecoder:\n  url: http://127.0.0.1:8200\nsources:\n" +
		// source-0: stall and resume of one rank, kill of the whole source.
		"  - name: pod-a\n    url: http://10.0.0.1:8100\n    p2p: 10.0.0.1:7777\n    ranks: 2\n    faults:\n" +
		"      stall: [kubectl, exec, pod-a, --, stop-core, \"{rank}\", \"{p2p_port}\"]\n" +
		"      resume: [kubectl, exec, pod-a, --, cont-core, \"{rank}\"]\n" +
		"      kill: [kubectl, delete, pod, pod-a]\n" +
		// source-1: a stall of one rank whose resume acts on the whole source.
		"  - name: pod-b\n    url: http://10.0.0.2:8100\n    p2p: 10.0.0.2:7777\n    ranks: 2\n    faults:\n" +
		"      stall: [stop-core, \"{rank}\"]\n      resume: [cont-all]\n" +
		// source-2: local, two ranks.
		"  - {name: local-c, url: 'http://127.0.0.1:8100', p2p: '127.0.0.1:7790', ranks: 2}\n"
	c := unopened(t, file)
	for _, tt := range []struct {
		step, want string // want "" : planned
	}{
		{"at 1s stall source-0/rank1 for 2s", ""},
		{"at 1s kill source-0", ""},
		{"at 1s kill source-0/rank1", `attach a.yaml: source-0 (pod-a): source-0/rank1: kill: the attach file's kill command for this source has no {rank}: it acts on the whole source, not on one rank (put {rank} in it, or name the source) (timeline step "at 1s kill source-0/rank1")`},
		{"at 1s stall source-0", `attach a.yaml: source-0 (pod-a): stall: the attach file's stall command for this source holds {rank}: it acts on one rank, not on the whole source (name one rank, source-N/rankR)`},
		{"at 1s stall source-1/rank0", `source-1/rank0: stall: the attach file's resume command for this source has no {rank}: it acts on the whole source, not on one rank`},
		{"at 1s stall source-0/rank2", `source-0/rank2: pod-a has no rank 2: the attach file gives it 2 ranks (0-1)`},
		{"at 1s stall source-2/rank1", ""},
		{"at 1s kill source-2/rank0", ""},
		{"at 1s remove source-2/rank1", ""},
		{"at 1s partition source-2/rank1 for 2s", ""},
		{"at 1s partition source-2 for 2s", "partition: p2pfault does not know the ports local-c listens on"},
		{"at 1s replace source-2/rank1", "source-2/rank1: replace: a local source is restarted from its own command line"},
	} {
		tl, err := fault.Parse(tt.step)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Plan(tl)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want it planned", tt.step, err)
		case tt.want != "" && (err == nil || exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want a usage error saying %q", tt.step, err, tt.want)
		}
	}

	// A nemesis drawing rank 1 of source-2 (--nemesis-sources 2/1) is
	// planned as its timeline is.
	stall, _ := fault.Lookup(fault.ActionStall)
	n := fault.Nemesis{Seed: 1, Kinds: []fault.Draw{{Kind: stall}}, Gap: 5 * time.Second, Length: 5 * time.Second,
		Settle: 5 * time.Second, Sources: []int{2}, Grains: map[int][]fault.Grain{2: {fault.OneRank(1)}}}
	tl := n.Schedule(time.Second, time.Minute, 5*time.Second, 3)
	if len(tl) == 0 || !tl[0].OnRank || tl[0].Rank != 1 {
		t.Fatalf("nemesis drew %v, want stalls of source-2/rank1", tl)
	}
	if _, err := c.Plan(tl); err != nil {
		t.Errorf("a nemesis on source-2/rank1: %v", err)
	}

	// A key on a rank acts through the rank's target (the experiment's
	// actTarget): refused with the timeline's words, before any command.
	rt, err := c.sources[0].RankTarget(1)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Name() != "pod-a/rank1" {
		t.Errorf("rank target named %q", rt.Name())
	}
	_, err = rt.Kill(context.Background(), nil)
	if err == nil || !errors.Is(err, fault.ErrNotTaken) || !strings.Contains(err.Error(), "the attach file's kill command for this source has no {rank}: it acts on the whole source, not on one rank") {
		t.Errorf("the kill key on pod-a/rank1: %v", err)
	}
	if _, ok := rt.(fault.NetTarget); ok {
		t.Error("a commands source's rank has ports p2pfault would cut on this host")
	}
	lr, err := c.sources[2].RankTarget(1)
	if err != nil {
		t.Fatal(err)
	}
	if nt, ok := lr.(fault.NetTarget); !ok || !slices.Equal(nt.Ports(), []int{7791}) || nt.P2PAddr() != "127.0.0.1:7791" {
		t.Errorf("local-c/rank1 as a network target: %#v", lr)
	}

	// {rank} and {p2p_port} are the rank's on a step of one rank.
	s := c.sources[0].Source()
	if got := s.Fill(s.Faults.Commands[fault.ActionStall], fault.OneRank(1)); !slices.Equal(got[5:], []string{"1", "7778"}) {
		t.Errorf("stall of rank 1 filled as %q", got)
	}
	// The commands of ready and restore act on the whole engine.
	for _, a := range []string{"ready", "restore"} {
		bad := strings.Replace(file, "      kill: [kubectl, delete, pod, pod-a]\n", "      "+a+": [wait-for, \"{rank}\"]\n", 1)
		if _, err := Parse("a.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "a.yaml:12: faults."+a+": {rank}: the "+a+" command acts on the whole engine") {
			t.Errorf("{rank} in %s: %v", a, err)
		}
	}
}

// dpEngine starts `sim serve --data-parallel-size 2` in a session of its
// own (setsid, as a user's script would), and returns it with the pids of
// its two engine cores (the processes on P2P ports base and base+1).
func dpEngine(t *testing.T, name string) (engine, [2]int) {
	t.Helper()
	e := startEngineAt(t, name, "0.05", "--data-parallel-size", "2")
	var cores [2]int
	for r := range cores {
		l, err := FindListener("127.0.0.1", e.p2p+r)
		if err != nil || l.Sid != e.pid || l.Pid == e.pid {
			t.Fatalf("rank %d's P2P port %d: %+v %v, want a core of session %d", r, e.p2p+r, l, err, e.pid)
		}
		cores[r] = l.Pid
	}
	return e, cores
}

// giveRanks gives the first source of the attach file at path n ranks.
func giveRanks(t *testing.T, path string, n int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err == nil {
		err = os.WriteFile(path, []byte(strings.Replace(string(data), "    p2p: ", "    ranks: "+strconv.Itoa(n)+"\n    p2p: ", 1)), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// rankOf is source name of c and its rank r.
func rankOf(t *testing.T, c *Cluster, name string, r int) (*Target, fault.Target) {
	t.Helper()
	src, ok := c.Source(name)
	if !ok {
		t.Fatalf("no source %s", name)
	}
	rt, err := src.RankTarget(r)
	if err != nil {
		t.Fatal(err)
	}
	return src, rt
}

// TestLocalRankStallStopsOnlyThatCore: a stall of rank 1 of a local DP
// source stops rank 1's engine core alone (state T), not the front end or
// rank 0's core; it is recorded (part: its pids alone) while it holds, and
// the cluster's Close, which every run's end calls, resumes it.
func TestLocalRankStallStopsOnlyThatCore(t *testing.T) {
	e, cores := dpEngine(t, "source-0")
	dir := t.TempDir()
	book, err := guard.NewBook(filepath.Join(dir, guard.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, dir, fakeDecoder(t), []engine{e}, nil)
	giveRanks(t, path, 2)
	g, genv := guardArgv(t)
	c := openLocal(t, path, Options{LogDir: dir, Book: book, Guard: g, GuardEnv: genv})
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	src, rt := rankOf(t, c, "source-0", 1)
	if _, err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := sessiontest.State(t, cores[1]); s != 'T' {
		t.Errorf("rank 1's core (pid %d) in state %c after its stall, want T", cores[1], s)
	}
	for who, pid := range map[string]int{"the front end": e.pid, "rank 0's core": cores[0]} {
		if s := sessiontest.State(t, pid); s == 'T' {
			t.Errorf("%s (pid %d) stopped by rank 1's stall", who, pid)
		}
	}
	if h, ok := rt.(fault.Inspectable).Host(); !ok || !slices.Equal(h.Part, []int{cores[1]}) || h.Sid != e.pid {
		t.Errorf("rank 1's host %+v (%v), want its core alone as the part of session %d", h, ok, e.pid)
	}
	rec, err := guard.ReadRecord(book.Path())
	if err != nil || len(rec.Stalls) != 1 {
		t.Fatalf("stall record %+v (%v), want rank 1's stall", rec, err)
	}
	if s := rec.Stalls[0]; s.Source != "source-0/rank1" || !s.Part || s.Sid != e.pid || len(s.Members) != 1 || s.Members[0].Pid != cores[1] || s.Guard.Pid == 0 {
		t.Errorf("recorded %+v, want source-0/rank1: part, session %d, member %d, a guard", s, e.pid, cores[1])
	}
	if !src.Stalled() {
		t.Error("the source does not say it is stalled")
	}
	// Its state says rank 1 stopped, not the whole engine: the front end
	// and rank 0 go on.
	if in := src.State(); in.State == event.StateStopped || !slices.Equal(in.StoppedRanks, []int{1}) {
		t.Errorf("source-0's state %s, stopped ranks %v (%q), want rank 1 stopped alone", in.State, in.StoppedRanks, in.StateText())
	}
	// A second stall of the source, whole or another rank, is refused
	// while this one holds (the kinds' rule, asked by Do).
	if _, err := src.Do(context.Background(), fault.ActionStall); err == nil {
		t.Error("a whole-source stall taken on top of rank 1's")
	}

	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{e.pid, cores[0], cores[1]} {
		if s := sessiontest.State(t, pid); s == 'T' {
			t.Errorf("pid %d in state T after Close", pid)
		}
	}
	if rec, _ := guard.ReadRecord(book.Path()); len(rec.Stalls) != 0 {
		t.Errorf("record keeps %+v after Close", rec.Stalls)
	}
	waitHealth(t, e.url(), 5*time.Second)
	logb, _ := os.ReadFile(filepath.Join(dir, "guard-source-0.log"))
	if strings.Contains(string(logb), "resuming") {
		t.Errorf("the guard acted on a normal resume:\n%s", logb)
	}
}

// TestLocalRankKillEndsTheWholeEngineAndRestartsIt: a kill of rank 1 of a
// local DP source SIGKILLs that core, then the whole session (vLLM's
// front end ends the engine when one core dies), and restarts the engine
// from /proc: every rank back on its own P2P port, in a new session.
func TestLocalRankKillEndsTheWholeEngineAndRestartsIt(t *testing.T) {
	e, _ := dpEngine(t, "source-0")
	dir := t.TempDir()
	path := writeFile(t, dir, fakeDecoder(t), []engine{e}, nil)
	giveRanks(t, path, 2)
	c := openLocal(t, path, Options{LogDir: dir, ReadyTimeout: 60 * time.Second})
	_, rt := rankOf(t, c, "source-0", 1)
	var signalled time.Time
	ready, err := rt.Kill(context.Background(), func(at time.Time, err error) {
		if err != nil {
			t.Errorf("signalled with %v", err)
		}
		signalled = at
	})
	if l, lerr := FindListener("127.0.0.1", e.p2p); lerr == nil && l.Sid != e.pid {
		killSessionOnCleanup(t, l.Sid)
	}
	if err != nil {
		t.Fatal(err)
	}
	if signalled.IsZero() || ready.Before(signalled) {
		t.Errorf("signalled at %v, ready at %v", signalled, ready)
	}
	if live, _ := session.Live(e.pid); len(live) != 0 {
		t.Errorf("the old session %d still has %v: a rank's kill ends the whole engine", e.pid, live)
	}
	var sid int
	for r := range 2 {
		l, err := FindListener("127.0.0.1", e.p2p+r)
		if err != nil || l.Sid == e.pid || (sid != 0 && l.Sid != sid) {
			t.Fatalf("rank %d's P2P port after the restart: %+v %v, want one new session for both", r, l, err)
		}
		sid = l.Sid
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCommandRankStallRunsItsCommandsWithTheRank: a stall of rank 1 of a
// commands source runs its stall command with {rank} 1 and {p2p_port}
// the rank's own port, records the resume of that rank, and its resume
// (here Close's) runs the resume command for the same rank.
func TestCommandRankStallRunsItsCommandsWithTheRank(t *testing.T) {
	dec, srcs := fakeDecoder(t), []engine{startEngine(t, "source-0")}
	dir := t.TempDir()
	log := filepath.Join(dir, "argv.log")
	k := fakeKubectl(t, dir, log)
	faults := "\n      stall: [" + k + ", stall, \"{name}\", \"{rank}\", \"{p2p_port}\"]\n      resume: [" + k + ", resume, \"{name}\", \"{rank}\"]"
	path := writeFile(t, dir, dec, srcs, map[string]string{"source-0": faults})
	giveRanks(t, path, 2)
	book, err := guard.NewBook(filepath.Join(dir, guard.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	c := openLocal(t, path, Options{LogDir: dir, Book: book})
	_, rt := rankOf(t, c, "source-0", 1)
	if _, err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec, err := guard.ReadRecord(book.Path())
	wantResume := []string{k, "resume", "source-0", "1"}
	if err != nil || len(rec.Stalls) != 1 || rec.Stalls[0].Source != "source-0/rank1" || !slices.Equal(rec.Stalls[0].Resume, wantResume) {
		t.Errorf("recorded %+v (%v), want source-0/rank1's stall resumed by %q", rec.Stalls, err, wantResume)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"stall source-0 1 " + strconv.Itoa(srcs[0].p2p+1), "resume source-0 1"}
	if got := readLines(t, log); !slices.Equal(got, want) {
		t.Errorf("commands ran %q, want %q", got, want)
	}
	if rec, _ := guard.ReadRecord(book.Path()); len(rec.Stalls) != 0 {
		t.Errorf("record keeps %+v after Close", rec.Stalls)
	}
}
