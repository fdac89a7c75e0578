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
	"p2pfault/runner"
)

// TestLinkedRunOnTheVirtualCluster: with Config.Link, every pull names a
// link of its own decoder ↔ source pair, never the source's own address,
// and the run judges as without: the healthy source's pulls through both
// decoders hit throughout, and the stalled source's miss in its window
// (its silence crosses the link: the link answers no heartbeat).
func TestLinkedRunOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s stall source-0 for 10s", Duration: 30 * time.Second, Link: true},
			runner.Config{Decoders: 2})
		own := map[string]bool{}
		peers := map[string]map[string]bool{} // pair → addresses named
		for _, ev := range evs {
			switch ev.Kind {
			case event.KindAddress:
				own[ev.Address.P2P] = true
			case event.KindSamples:
				for _, s := range ev.Samples {
					pair := fmt.Sprintf("source-%d decoder-%d", s.Source, s.Decoder)
					if peers[pair] == nil {
						peers[pair] = map[string]bool{}
					}
					peers[pair][s.Peer] = true
				}
			}
		}
		seen := map[string]string{}
		for pair, addrs := range peers {
			if len(addrs) != 1 {
				t.Errorf("%s named %v, want one link", pair, addrs)
			}
			for a := range addrs {
				if own[a] {
					t.Errorf("%s named the source's own address %s", pair, a)
				}
				if other, ok := seen[a]; ok {
					t.Errorf("%s and %s share the link %s", pair, other, a)
				}
				seen[a] = pair
			}
		}
		if len(peers) != 4 {
			t.Errorf("pairs sampled %v, want 4", peers)
		}
		got := map[string]event.RankSummary{}
		for _, r := range v.Ranks {
			got[fmt.Sprintf("source-%d decoder-%d %s", r.Source, r.Decoder, r.Part)] = r
		}
		for d := range 2 {
			healthy := got[fmt.Sprintf("source-1 decoder-%d %s", d, check.PartOutside)]
			if healthy.N < 10 || healthy.Pulled != healthy.N {
				t.Errorf("source-1 through decoder-%d: %d of %d hit, want all of ≥ 10", d, healthy.Pulled, healthy.N)
			}
			faulted := got[fmt.Sprintf("source-0 decoder-%d %s", d, check.PartFault)]
			if faulted.N == 0 || faulted.Pulled == faulted.N {
				t.Errorf("source-0 through decoder-%d in its stall: %d of %d hit, want some missing", d, faulted.Pulled, faulted.N)
			}
		}
	})
}

// linkRun is what a test reads of a run with a link kind on source-0:
// the verification lines, and source-0's pulls started in [from, to) of
// the run (since t0).
type linkRun struct {
	verified []event.Verification
	pulls    []event.Sample
	healthy  []event.Sample // source-1's, the whole run
}

func runLinkKind(t *testing.T, arm, timeline string, from, to time.Duration) linkRun {
	t.Helper()
	evs, _ := mustRunVirtual(t, experiment.Config{Arm: arm, Timeline: timeline}, runner.Config{ExtraArgs: armArgs(arm)})
	var r linkRun
	for _, ev := range evs {
		switch ev.Kind {
		case event.KindVerification:
			r.verified = append(r.verified, *ev.Verification)
		case event.KindSamples:
			for _, s := range ev.Samples {
				switch {
				case s.Source == 1:
					r.healthy = append(r.healthy, s)
				case s.Start >= from && s.Start < to:
					r.pulls = append(r.pulls, s)
				}
			}
		}
	}
	return r
}

// TestMuteWaitsEachLookupsDeadline: mute on source-0 (every lookup_resp
// withheld, heartbeats flowing) on the virtual cluster: the kind alone
// implies --link; the decoder's pulls to source-0 wait for the sim's
// lookup deadline (8 s, --sim-lookup-timeout: MODEL.md mechanism 3, "a
// live peer that answers pings but never a lookup is caught by each
// lookup's own deadline") and miss; source-1 is untouched; the
// verification counts what the link withheld and the heartbeats that
// passed.
func TestMuteWaitsEachLookupsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := runLinkKind(t, "main", "at 10s mute source-0 for 20s", 11*time.Second, 21*time.Second)
		var line string
		for _, v := range r.verified {
			if v.Action == "mute" {
				line = v.Detail
				if !v.Verified {
					t.Errorf("mute not verified: %s", v.Detail)
				}
			}
		}
		t.Logf("verification: %s", line)
		if !strings.Contains(line, "lookup_resp withheld") || !strings.Contains(line, "heartbeats passed") {
			t.Errorf("verification %q does not count what was withheld and what passed", line)
		}
		if len(r.pulls) == 0 {
			t.Fatal("no pull of source-0 started in the mute")
		}
		// One unanswered lookup reaps the session (consumer.go
		// superviseReady): the pulls waiting on it miss together, the
		// first having waited the whole deadline.
		longest := time.Duration(0)
		for _, s := range r.pulls {
			if s.Hit() || s.Latency > 8500*time.Millisecond {
				t.Errorf("pull at %v under mute: hit %v in %v, want a miss within the 8 s lookup deadline", s.Start, s.Hit(), s.Latency)
			}
			longest = max(longest, s.Latency)
		}
		t.Logf("%d pulls of source-0 from 11 s to 21 s, all missed, the longest %v", len(r.pulls), longest)
		if longest < 7500*time.Millisecond {
			t.Errorf("longest pull under mute %v, want the 8 s lookup deadline", longest)
		}
		for _, s := range r.healthy {
			if !s.Hit() {
				t.Errorf("source-1's pull at %v missed", s.Start)
			}
		}
	})
}

// TestHoldAckWaitsTheHandshakeDeadline: hold-ack on source-0 resets its
// links and withholds every connect_ack after: on main (pending
// handshakes wait, vLLM main) each new session's pulls wait for
// VLLM_P2P_HANDSHAKE_TIMEOUT_S (30 s) and miss; on fixed (#64501:
// prefill while the handshake is pending) they miss at once.
func TestHoldAckWaitsTheHandshakeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, arm := range []string{"main", "fixed"} {
			r := runLinkKind(t, arm, "at 10s hold-ack source-0 for 40s", 11*time.Second, 15*time.Second)
			for _, v := range r.verified {
				if v.Action == "hold-ack" {
					t.Logf("%s: verification: %s", arm, v.Detail)
					if !v.Verified || !strings.Contains(v.Detail, "connect_ack withheld") {
						t.Errorf("%s: hold-ack verification: %+v", arm, v)
					}
				}
			}
			if len(r.pulls) == 0 {
				t.Fatalf("%s: no pull of source-0 started in the fault", arm)
			}
			longest := time.Duration(0)
			for _, s := range r.pulls {
				if s.Hit() {
					t.Errorf("%s: pull at %v hit with the ack withheld", arm, s.Start)
				}
				longest = max(longest, s.Latency)
			}
			t.Logf("%s: %d pulls of source-0 from 11 s to 15 s, the longest %v", arm, len(r.pulls), longest)
			switch {
			case arm == "main" && (longest < 26*time.Second || longest > 30500*time.Millisecond):
				t.Errorf("main: longest pull %v, want up to the 30 s handshake deadline", longest)
			case arm == "fixed" && longest > time.Second:
				t.Errorf("fixed: longest pull %v, want a miss at once", longest)
			}
		}
	})
}

// TestLatencyAddsFourCrossingsToAPull: latency 200ms on source-0's link:
// a pull on a ready session crosses it four times (lookup, lookup_resp,
// fetch, transfer_done), so it still hits, 800 ms later than before.
func TestLatencyAddsFourCrossingsToAPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := runLinkKind(t, "main", "at 10s latency 200ms source-0 for 10s", 11*time.Second, 19*time.Second)
		for _, v := range r.verified {
			if v.Action == "latency" && (!v.Verified || !strings.Contains(v.Detail, "frames slowed")) {
				t.Errorf("latency verification: %+v", v)
			}
		}
		if len(r.pulls) == 0 {
			t.Fatal("no pull of source-0 under the latency")
		}
		for _, s := range r.pulls {
			if !s.Hit() || s.Latency < 800*time.Millisecond || s.Latency > 1200*time.Millisecond {
				t.Errorf("pull at %v under 200 ms of latency: hit %v in %v, want a hit in 0.8 s and the pull's own time", s.Start, s.Hit(), s.Latency)
			}
		}
		for _, s := range r.healthy {
			if !s.Hit() || s.Latency > 500*time.Millisecond {
				t.Errorf("source-1's pull at %v: hit %v in %v", s.Start, s.Hit(), s.Latency)
			}
		}
	})
}

// TestPDThroughTheLink: in PD mode the decode leg's remote_prefiller
// names the link, and the decode legs load from the prefiller through it.
func TestPDThroughTheLink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, _ := mustRunVirtual(t, experiment.Config{Mode: event.ModePD, Link: true, Duration: 15 * time.Second}, runner.Config{})
		own, n := map[string]bool{}, 0
		for _, ev := range evs {
			switch ev.Kind {
			case event.KindAddress:
				own[ev.Address.P2P] = true
			case event.KindSamples:
				for _, s := range ev.Samples {
					n++
					if own[s.Peer] || !s.Hit() {
						t.Errorf("decode leg %d of source-%d named %s (own: %v), hit %v", s.Trial, s.Source, s.Peer, own[s.Peer], s.Hit())
					}
				}
			}
		}
		if n < 20 {
			t.Errorf("%d decode legs, want ≥ 20", n)
		}
	})
}

// TestLinkEventsCountWhatEachLinkDid: a run with links says so in its run
// event and sends the links' counts once a second while they move: under
// mute on source-0, its withheld lookup_resp grow while its heartbeats
// flow, and source-1's link passes everything.
func TestLinkEventsCountWhatEachLinkDid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, _ := mustRunVirtual(t, experiment.Config{Timeline: "at 10s mute source-0 for 20s"}, runner.Config{})
		linked := false
		var during, last map[int]event.LinkCounts
		for _, ev := range evs {
			switch {
			case ev.Kind == event.KindRun:
				linked = ev.Run.Link
			case ev.Kind == event.KindLink:
				now := map[int]event.LinkCounts{}
				for _, l := range ev.Links {
					now[l.Source] = l
				}
				if ev.T > 12*time.Second && ev.T < 20*time.Second && during == nil {
					during = now
				}
				last = now
			}
		}
		if !linked {
			t.Error("the run event does not say the run relays its pairs")
		}
		if during == nil || last == nil {
			t.Fatalf("no link event in the mute (%v) or at all (%v)", during, last)
		}
		s0, s1 := last[0], last[1]
		t.Logf("source-0 in the mute %+v, at the end %+v; source-1 %+v", during[0], s0, s1)
		if during[0].Withheld == 0 || s0.Withheld <= during[0].Withheld {
			t.Errorf("source-0's withheld lookup_resp did not grow in the mute: %d, then %d", during[0].Withheld, s0.Withheld)
		}
		if s0.Heartbeats <= during[0].Heartbeats {
			t.Errorf("source-0's heartbeats did not flow in the mute: %d, then %d", during[0].Heartbeats, s0.Heartbeats)
		}
		if s1.Withheld != 0 || s1.Dropped != 0 || s1.Passed == 0 {
			t.Errorf("source-1's link withheld or passed nothing: %+v", s1)
		}
	})
}
