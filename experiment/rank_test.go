package experiment_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/raceguard"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

// TestDataParallelSourcesOnTheVirtualCluster: two sources of two
// data-parallel ranks each, `at 10s kill source-0/rank1`, on the virtual
// cluster in a synctest bubble. The run says each source's ranks; the
// trials of each source go to its ranks in turn, each naming base+rank;
// the kill of one rank warns that the whole engine goes (vLLM's front end
// ends it when a core dies), acts on source-0/rank1 as its events say, and
// is verified; the verdict breaks source-0's pulls down by rank.
func TestDataParallelSourcesOnTheVirtualCluster(t *testing.T) {
	raceguard.Test(t, func(t *testing.T) {
		tl, err := fault.Parse("at 10s kill source-0/rank1")
		if err != nil {
			t.Fatal(err)
		}
		exp, err := experiment.New(experiment.Config{
			Timeline: tl.String(), Duration: 40 * time.Second,
			Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{SourceDP: 2, RestartDelay: time.Second}},
			OutDir:  t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		evs, v, err := runCollecting(ctx, exp)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
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
	raceguard.Test(t, func(t *testing.T) {
		exp, err := experiment.New(experiment.Config{
			Case: fault.ActionGone, Mode: event.ModePD,
			Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{SourceDP: 2}},
			OutDir:  t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		evs, v, err := runCollecting(ctx, exp)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
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
