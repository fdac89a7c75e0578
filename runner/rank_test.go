package runner_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/internal/enginetest"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

func TestCoreRankReadsTheMarkers(t *testing.T) {
	tests := []struct {
		argv []string
		rank int
		ok   bool
	}{
		{[]string{"p2pfault", "sim", "core", "--data-parallel-rank", "1"}, 1, true},
		{[]string{"p2pfault", "sim", "core", "--data-parallel-rank=3"}, 3, true},
		{[]string{"VLLM::EngineCore_DP2"}, 2, true},
		{[]string{"p2pfault", "sim", "serve", "m", "--data-parallel-size", "2"}, 0, false},
		{[]string{"p2pfault", "sim", "core", "--data-parallel-rank", "x"}, 0, false},
	}
	for _, tt := range tests {
		r, ok := runner.CoreRank(tt.argv)
		if r != tt.rank || ok != tt.ok {
			t.Errorf("CoreRank(%q) = %d, %v; want %d, %v", tt.argv, r, ok, tt.rank, tt.ok)
		}
	}
}

// TestRankStallStopsOnlyThatCore: on a source started with
// --data-parallel-size 2 (the fake engine: a front end and one core per
// rank, each holding base+rank), stalling source-0/rank1 stops exactly the
// core whose command line marks rank 1; the front end and rank 0's core
// keep running, and Continue resumes it.
func TestRankStallStopsOnlyThatCore(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources, cfg.SourceDP = 1, 2
	c, _ := startCluster(t, cfg)
	src := c.Sources()[0]
	if got := src.Spec().P2PPorts(); len(got) != 2 || got[1] != got[0]+1 {
		t.Fatalf("P2P ports %v: want two consecutive", got)
	}
	_, sid, ok := src.Session()
	if !ok {
		t.Fatal("source-0 has no session")
	}
	if !enginetest.Eventually(10*time.Second, func() bool { return len(liveMembers(t, sid)) == 3 }) {
		t.Fatalf("session %d has %v, want a front end and two cores", sid, liveMembers(t, sid))
	}
	rk, err := src.Target().Rank(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Target().Rank(2); err == nil {
		t.Error("Rank(2) of a source of 2 ranks: no error")
	}
	if rk.Name() != "source-0/rank1" || rk.P2PPort() != src.P2PPort()+1 || !slices.Equal(rk.Ports(), []int{src.P2PPort() + 1}) {
		t.Errorf("rank target %s port %d ports %v", rk.Name(), rk.P2PPort(), rk.Ports())
	}
	core := rk.Pids()
	if len(core) != 1 {
		t.Fatalf("rank 1's pids %v: want its one core", core)
	}
	ctx := context.Background()
	if _, err := rk.Stop(ctx); err != nil {
		t.Fatalf("stop rank 1: %v", err)
	}
	t.Cleanup(func() { _ = rk.Continue(context.Background()) })
	ms, err := session.Members(sid)
	if err != nil {
		t.Fatal(err)
	}
	var stopped, running []int
	for _, m := range ms {
		if !m.Live() {
			continue
		}
		if m.Stopped() {
			stopped = append(stopped, m.Pid)
		} else {
			running = append(running, m.Pid)
		}
	}
	if !slices.Equal(stopped, core) || len(running) != 2 {
		t.Errorf("after stopping rank 1: stopped %v, running %v; want stopped exactly %v and 2 running", stopped, running, core)
	}
	// The engine's state says so: ready, rank 1 stopped, not the whole
	// engine stopped.
	if in := src.Info(); in.State != event.StateReady || !slices.Equal(in.StoppedRanks, []int{1}) || in.StateText() != "rank1 stopped" {
		t.Errorf("source-0's state with rank 1 stopped: %s, stopped ranks %v (%q); want ready, [1], \"rank1 stopped\"", in.State, in.StoppedRanks, in.StateText())
	}
	if err := rk.Continue(ctx); err != nil {
		t.Fatalf("continue rank 1: %v", err)
	}
	if st, err := session.Stat(core[0]); err != nil || st.Stopped() {
		t.Errorf("rank 1's core after Continue: %+v, %v", st, err)
	}
	if in := src.Info(); in.State != event.StateReady || len(in.StoppedRanks) != 0 {
		t.Errorf("source-0's state after Continue: %s, stopped ranks %v; want ready, none", in.State, in.StoppedRanks)
	}
	// The whole engine stopped is the whole-engine word.
	if _, err := src.Target().Stop(ctx); err != nil {
		t.Fatalf("stop source-0: %v", err)
	}
	t.Cleanup(func() { _ = src.Target().Continue(context.Background()) })
	if in := src.Info(); in.State != event.StateStopped || len(in.StoppedRanks) != 0 || in.StateText() != "stopped" {
		t.Errorf("source-0's state stopped whole: %s, stopped ranks %v (%q); want stopped, none", in.State, in.StoppedRanks, in.StateText())
	}
	if err := src.Target().Continue(ctx); err != nil {
		t.Fatalf("continue source-0: %v", err)
	}
}

// TestPlanGivesEachDataParallelSourceARunOfP2PPorts: rank r of source i
// listens at its base + r, bases far enough apart, and the decoder after
// them; vllm gets the side channel's environment as well.
func TestPlanGivesEachDataParallelSourceARunOfP2PPorts(t *testing.T) {
	for _, engine := range []string{runner.EngineSim, runner.EngineVLLM} {
		specs, err := runner.Plan(runner.Config{Engine: engine, Sources: 2, SourceDP: 2, SelfBin: "/bin/p2pfault"})
		if err != nil {
			t.Fatal(err)
		}
		wantPorts := [][]int{{7777, 7778}, {7779, 7780}, {7781}}
		for i, s := range specs {
			if !slices.Equal(s.P2PPorts(), wantPorts[i]) {
				t.Errorf("%s %s: P2P ports %v, want %v", engine, s.Name, s.P2PPorts(), wantPorts[i])
			}
			dp := slices.Index(s.Args, "--data-parallel-size")
			if s.Role == "source" && (dp < 0 || s.Args[dp+1] != "2") {
				t.Errorf("%s %s: args %q lack --data-parallel-size 2", engine, s.Name, s.Args)
			}
			if s.Role == "decoder" && dp >= 0 {
				t.Errorf("%s decoder: args %q have --data-parallel-size", engine, s.Args)
			}
			side := slices.Contains(s.Env, "VLLM_P2P_SIDE_CHANNEL_PORT="+strconv.Itoa(wantPorts[i][0]))
			if want := engine == runner.EngineVLLM && s.Role == "source"; side != want {
				t.Errorf("%s %s: env %q: VLLM_P2P_SIDE_CHANNEL_PORT set %v, want %v", engine, s.Name, s.Env, side, want)
			}
		}
	}
	if _, err := runner.Plan(runner.Config{SourceDP: 99, SelfBin: "/bin/p2pfault"}); err == nil {
		t.Error("SourceDP 99: no error")
	}
}

// TestCrashCoreReturnsOnceTheCoreIsDead: CrashCore of rank 1 of a source
// of two ranks returns only once its core's death is visible, the pid
// dead in /proc and its P2P port listening no more (what gone's last cut
// waits for: the kernel has sent the core's resets and FINs).
func TestCrashCoreReturnsOnceTheCoreIsDead(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources, cfg.SourceDP = 1, 2
	c, _ := startCluster(t, cfg)
	src := c.Sources()[0]
	rk, err := src.Target().Rank(1)
	if err != nil {
		t.Fatal(err)
	}
	var core []int
	if !enginetest.Eventually(10*time.Second, func() bool {
		core = rk.Pids()
		pid, _, ok := runner.PortHolder(rk.P2PPort())
		return len(core) == 1 && ok && pid == core[0]
	}) {
		t.Fatalf("rank 1's pids %v, its port %d: want its one core listening on it", core, rk.P2PPort())
	}
	before := time.Now()
	at, err := src.Target().CrashCore(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if at.Before(before) || at.After(time.Now()) {
		t.Errorf("CrashCore's signal time %v is not within the call (from %v)", at, before)
	}
	if st, err := session.Stat(core[0]); err == nil && st.Live() {
		t.Errorf("rank 1's core %d right after CrashCore: state %c, want dead", core[0], st.State)
	}
	if pid, _, ok := runner.PortHolder(rk.P2PPort()); ok {
		t.Errorf("rank 1's P2P port %d still listens right after CrashCore (pid %d)", rk.P2PPort(), pid)
	}
}
