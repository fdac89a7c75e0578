package experiment_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
)

// TestDataParallelSourcesOnTheVirtualCluster: two sources of two
// data-parallel ranks each, `at 10s kill source-0/rank1`, on the virtual
// cluster in a synctest bubble. The run says each source's ranks; the
// trials of each source go to its ranks in turn, each naming base+rank;
// the kill of one rank warns that the whole engine goes (vLLM's front end
// ends it when a core dies), acts on source-0/rank1 as its events say, and
// is verified; the verdict breaks source-0's pulls down by rank.
func TestDataParallelSourcesOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tl, err := fault.Parse("at 10s kill source-0/rank1")
		if err != nil {
			t.Fatal(err)
		}
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: tl.String(), Duration: 40 * time.Second},
			runner.Config{SourceDP: 2, RestartDelay: time.Second})
		checkRankEvents(t, evs)
		parts := map[string]int{}
		for _, r := range v.Ranks {
			if r.Source == 0 && r.N > 0 {
				parts[fmt.Sprintf("%s rank%d", r.Part, r.Rank)] = r.N
			}
		}
		for _, want := range []string{"fault rank0", "fault rank1", "outside rank0", "outside rank1"} {
			if parts[want] == 0 {
				t.Errorf("no %s in source-0's breakdown %v", want, parts)
			}
		}
	})
}

func checkRankEvents(t *testing.T, evs []event.Event) {
	t.Helper()
	peers := map[int]map[int]string{} // source, rank: the peer named
	var warned, faulted, verified bool
	for _, ev := range evs {
		switch ev.Kind {
		case event.KindRun:
			if got := fmt.Sprint(ev.Run.SourceRanks); got != "[2 2]" {
				t.Errorf("run source_ranks %s, want [2 2]", got)
			}
		case event.KindSamples:
			for _, s := range ev.Samples {
				if peers[s.Source] == nil {
					peers[s.Source] = map[int]string{}
				}
				if p, ok := peers[s.Source][s.Rank]; ok && p != s.Peer && s.Peer != "" {
					t.Errorf("source-%d rank %d named %s and %s", s.Source, s.Rank, p, s.Peer)
				}
				if s.Peer != "" {
					peers[s.Source][s.Rank] = s.Peer
				}
				if want := int(s.Trial/2) % 2; s.Rank != want {
					t.Errorf("trial %d of source-%d on rank %d, want %d", s.Trial, s.Source, s.Rank, want)
				}
			}
		case event.KindWarning:
			warned = warned || strings.Contains(ev.Message, "kill source-0/rank1: vLLM shuts the whole engine down when one engine core dies")
		case event.KindFault:
			faulted = faulted || ev.Fault.Action == fault.ActionKill && ev.Fault.Target == "source-0/rank1" && ev.Fault.Err == ""
		case event.KindVerification:
			verified = verified || ev.Verification.Target == "source-0/rank1" && ev.Verification.Verified
		}
	}
	for src, byRank := range peers {
		var p0, p1 int
		fmt.Sscanf(byRank[0][strings.LastIndex(byRank[0], ":")+1:], "%d", &p0)
		fmt.Sscanf(byRank[1][strings.LastIndex(byRank[1], ":")+1:], "%d", &p1)
		if p0 == 0 || p1 != p0+1 {
			t.Errorf("source-%d: rank 0 named %q, rank 1 %q: want base and base+1", src, byRank[0], byRank[1])
		}
	}
	if !warned || !faulted || !verified {
		t.Errorf("engine-wide warning %v, fault on source-0/rank1 %v, verified %v: want all", warned, faulted, verified)
	}
}

// TestGoneOnADataParallelSourceOnTheVirtualCluster is issue 28's #56828
// layout, pd mode, on the virtual cluster: case gone kills source-0's rank
// 0 core and cuts the rest of it off. The source stays down to the end
// (its window never closes, its engine exits), and the usual checks judge
// it: pulls to both ranks wait on their sessions (the handshake deadline
// of the new sessions the decoder opens to a pod that answers nothing), so
// faulted_max fails, and the breakdown shows both ranks' pulls in the
// window.
func TestGoneOnADataParallelSourceOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Case: fault.ActionGone, Mode: event.ModePD}, runner.Config{SourceDP: 2})
		var gone, exited, closed bool
		for _, ev := range evs {
			switch {
			case ev.Kind == event.KindFault && ev.Fault.Action == fault.ActionGone:
				gone = ev.Fault.Err == "" && ev.Fault.Source == 0
			case ev.Kind == event.KindEngine && ev.Engine.Name == "source-0" && ev.Engine.State == event.StateExited:
				exited = true
			case ev.Kind == event.KindWindow && ev.Window.End != 0:
				closed = true
			}
		}
		if !gone || !exited || closed {
			t.Errorf("gone fired %v, source-0 exited %v, a window closed %v: want fired, exited, none closed", gone, exited, closed)
		}
		for _, c := range v.Checks {
			if c.Name == "faulted_max" && c.Passed {
				t.Errorf("faulted_max passed: %s", c.Detail)
			}
		}
		ranks := map[int]event.RankSummary{}
		for _, r := range v.Ranks {
			if r.Source == 0 && r.Part == "fault" {
				ranks[r.Rank] = r
			}
		}
		for r := range 2 {
			if s := ranks[r]; s.N == 0 || s.Latency.Max < 15*time.Second {
				t.Errorf("rank %d in the window: %+v, want pulls, the slowest past 15 s", r, s)
			}
		}
	})
}

// TestPartitionOfOneRankCutsOnlyItOnTheVirtualCluster: `at 10s partition
// source-0/rank1 for 20s` on a source of two ranks, on the virtual cluster
// in a synctest bubble. The cut drops rank 1's P2P port alone, as the
// firewall does on a launched engine: its verification is a hanging
// connect to rank 1's port, the pulls to rank 0 hit throughout the window
// at their usual latency, and rank 1's wait (on the cut session, then the
// lookup deadline, then the heal's retransmission).
func TestPartitionOfOneRankCutsOnlyItOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s partition source-0/rank1 for 20s"}, runner.Config{SourceDP: 2})
		var rank1 string // rank 1's P2P address, as its pulls name it
		var verified bool
		for _, ev := range evs {
			switch ev.Kind {
			case event.KindSamples:
				for _, s := range ev.Samples {
					if s.Source == 0 && s.Rank == 1 && s.Peer != "" {
						rank1 = s.Peer
					}
				}
			case event.KindVerification:
				vf := ev.Verification
				if vf.Target == "source-0/rank1" {
					verified = vf.Verified && strings.Contains(vf.Detail, "a connect to "+rank1+" hangs") &&
						strings.Contains(vf.Detail, "the cluster holds partition")
					t.Logf("verification: %v %s", vf.Verified, vf.Detail)
				}
			}
		}
		if !verified {
			t.Errorf("no verification of the partition of source-0/rank1 naming a hanging connect to %s", rank1)
		}
		got := map[int]bool{}
		for _, r := range v.Ranks {
			if r.Source != 0 || r.Part != check.PartFault {
				continue
			}
			got[r.Rank] = true
			lat := r.Latency
			t.Logf("rank %d in the window: %d pulls, %d pulled, p50 %v, max %v", r.Rank, r.N, r.Pulled, lat.P50, lat.Max)
			switch {
			case r.N == 0:
				t.Errorf("rank %d: no pulls in the window", r.Rank)
			case r.Rank == 0 && (r.Pulled != r.N || lat.Max > time.Second):
				t.Errorf("rank 0: %d of %d pulled, max %v; want every pull a hit at its usual latency (its port is not cut)", r.Pulled, r.N, lat.Max)
			case r.Rank == 1 && lat.P50 < time.Second:
				t.Errorf("rank 1: p50 %v, want its pulls waiting on the cut port", lat.P50)
			}
		}
		if !got[0] || !got[1] {
			t.Errorf("source-0's breakdown in the window has ranks %v, want 0 and 1", got)
		}
	})
}

// TestRankStallOnTheVirtualCluster: `at 10s stall source-0/rank1 for 30s`
// on sources of two data-parallel ranks, the virtual cluster in a
// synctest bubble: the stall freezes rank 1's engine core alone (its own
// host), and is verified so, naming the processes stopped and running.
// The front end and rank 0 run on, so rank 0's pulls hit throughout the
// window as they do outside it; rank 1's never do: those in flight at the
// freeze end when the lookup deadline reaps the silent session (8 s), the
// next session's connect waits in the frozen core's backlog and its
// handshake runs to its deadline (30 s), as a whole source's stall does
// (TestSeedTableOnTheVirtualCluster's), and faulted_max fails on it.
func TestRankStallOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			lookupTO, handshakeTO = 8 * time.Second, 30 * time.Second
			costs                 = 100 * time.Millisecond // a hit's, a local prefill's
		)
		tl, err := fault.Parse("at 10s stall source-0/rank1 for 30s")
		if err != nil {
			t.Fatal(err)
		}
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: tl.String(), Duration: 65 * time.Second}, runner.Config{SourceDP: 2})
		var stalled, verified, resumed bool
		for _, ev := range evs {
			switch {
			case ev.Kind == event.KindCondition && ev.Condition.Source == 0 && ev.Condition.Condition == event.CondStalled:
				stalled = stalled || ev.Condition.Target == "source-0/rank1"
				if ev.Condition.Target != "source-0/rank1" {
					t.Errorf("condition %+v: a stall of one rank must name it", ev.Condition)
				}
			case ev.Kind == event.KindVerification && ev.Verification.Action == fault.ActionStall:
				verified = ev.Verification.Target == "source-0/rank1" && ev.Verification.Verified && ev.Verification.After == 0 &&
					ev.Verification.Detail == "source-0/rank1 (instance 1): stopped rank 1's core; running front end, rank 0's core"
				t.Logf("stall verified: %+v", ev.Verification)
			case ev.Kind == event.KindVerification && ev.Verification.Action == fault.ActionResume:
				resumed = ev.Verification.Verified && strings.Contains(ev.Verification.Detail, "stopped none; running front end, rank 0's core, rank 1's core")
			}
		}
		if !stalled || !verified || !resumed {
			t.Errorf("condition stalled naming source-0/rank1 %v, stall verified as rank 1's core alone %v, resume verified %v: want all", stalled, verified, resumed)
		}
		ranks := map[string]event.RankSummary{}
		for _, r := range v.Ranks {
			ranks[fmt.Sprintf("source-%d/rank%d %s", r.Source, r.Rank, r.Part)] = r
			t.Logf("source-%d/rank%d %-8s n=%d pulled=%d p50=%v max=%v", r.Source, r.Rank, r.Part, r.N, r.Pulled, r.Latency.P50, r.Latency.Max)
		}
		hitting := func(key string) {
			t.Helper()
			if r := ranks[key]; r.N == 0 || r.Pulled != r.N || r.Latency.Max > costs {
				t.Errorf("%s: %d pulls, %d hit, max %v; want every one a hit within %v", key, r.N, r.Pulled, r.Latency.Max, costs)
			}
		}
		for _, key := range []string{"source-0/rank0 fault", "source-0/rank0 outside", "source-0/rank1 outside", "source-1/rank0 outside", "source-1/rank1 outside"} {
			hitting(key)
		}
		r1 := ranks["source-0/rank1 fault"]
		if r1.N == 0 || r1.Pulled != 0 {
			t.Errorf("source-0/rank1 in its window: %d pulls, %d hit; want pulls and no hit", r1.N, r1.Pulled)
		}
		// The slowest opened the session after the reap, and waited its
		// handshake deadline; then its local prefill, in the burst of the
		// waiters released with it (22 of 400 tokens: 5 full steps of 55 ms).
		if max := r1.Latency.Max; max < handshakeTO || max > handshakeTO+costs+5*55*time.Millisecond {
			t.Errorf("source-0/rank1 in its window: max %v, want the %v handshake deadline plus a prefill in the burst", max, handshakeTO)
		}
		if p50 := r1.Latency.P50; p50 < lookupTO || p50 > handshakeTO-lookupTO {
			t.Errorf("source-0/rank1 in its window: p50 %v, want in [%v, %v]: the waiters on the new session", p50, lookupTO, handshakeTO-lookupTO)
		}
		if f, r0 := v.Summary.Faulted, ranks["source-0/rank0 fault"]; f.N != r0.N+r1.N || f.Pulled != r0.Pulled {
			t.Errorf("faulted %+v: want rank 0's %d pulls (all hits) and rank 1's %d", f, r0.N, r1.N)
		}
		if c, ok := resultOf(&v, "faulted_max"); !ok || c.Passed || !strings.Contains(c.Detail, "a request naming the faulted source took 30.") {
			t.Errorf("faulted_max %+v: want it failed on rank 1's 30 s pull", c)
		}
	})
}
