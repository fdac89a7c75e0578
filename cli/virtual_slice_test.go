package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/probe"
)

// TestVirtualSliceGivesTheSeedsTable runs the whole slice (main and fixed
// × stall, kill, remove) on the virtual cluster at time scale 1, inside a
// synctest bubble, and checks the seed's verdicts and every cell of its
// table against issue 8's tolerances with no slack: main stall fails on
// the handshake timeout, everything else passes. Its subtest (not with
// -short) runs the slice on real processes and compares the two tables.
func TestVirtualSliceGivesTheSeedsTable(t *testing.T) {
	out := t.TempDir()
	var r virtualRun
	synctest.Test(t, func(t *testing.T) {
		r = runVirtual(t, offGrid("slice", "--arms", "main,fixed", "--quiet", "--compare-seed", "--out", out)...)
	})
	t.Logf("slice: exit %d in %v on the fake clock\n%s", r.code, r.took, tail(r.stdout, 60))
	if r.code != 1 {
		t.Fatalf("slice exit %d, want 1 (main stall fails)\n%s%s", r.code, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep sliceReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.TimeScale != 1 || len(rep.Rows) != 6 {
		t.Fatalf("time_scale %v, %d rows; want 1 and 6\n%s", rep.TimeScale, len(rep.Rows), data)
	}
	for _, r := range rep.Rows {
		name := r.Arm + "/" + r.Case
		wantPass := name != "main/stall"
		if r.Passed != wantPass {
			t.Errorf("%s: passed=%v, want %v; checks %+v", name, r.Passed, wantPass, r.Checks)
		}
		if r.Faulted.N == 0 {
			t.Errorf("%s: no faulted pulls", name)
		}
		// Every pull that returned 200 answered its source's text: the
		// faults change where the KV comes from, never what it holds.
		content := false
		for _, c := range r.Checks {
			if c.Name == "content_matches" {
				content = true
				if !c.Passed || !strings.HasPrefix(c.Detail, "all ") {
					t.Errorf("%s: content_matches %+v, want a pass", name, c)
				}
			}
		}
		if !content {
			t.Errorf("%s: no content_matches among %+v", name, r.Checks)
		}
		// Healthy source: every pull hits (the seed's 100 %), each within
		// 0.1 s (issue 8 allows 0.5 s): a hit costs the sim's lookup,
		// transfer and decode, and no scheduler hiccup reaches the fake
		// clock.
		if r.Healthy.N == 0 || r.Healthy.Pulled != r.Healthy.N || r.Healthy.Max > 0.1 {
			t.Errorf("%s: healthy %+v, want every pull a hit, max <= 0.1s", name, r.Healthy)
		}
		switch {
		case name == "main/stall":
			// The seed: the max is the 30 s handshake deadline plus the
			// sim's own costs (a lookup, a prefill: tens of milliseconds)
			// and the first waiter's decode of its content tokens in the
			// burst of the waiters' recomputes, all released at the
			// deadline (after the first, one 55 ms step a token; sim/MODEL.md,
			// the scheduler), not "about" it; p50 in issue 8's window.
			maxMax := 30.1 + burstS
			if r.Faulted.Max < 30 || r.Faulted.Max > maxMax {
				t.Errorf("%s: faulted max %.3fs, want the 30 s handshake deadline + the sim's costs, in [30, %.3f]", name, r.Faulted.Max, maxMax)
			}
			if r.Faulted.P50 < 14.3 || r.Faulted.P50 > 19.4 {
				t.Errorf("%s: faulted p50 %.2fs, want in [14.3, 19.4]", name, r.Faulted.P50)
			}
			if !seedLikeFailure.MatchString(failingDetails(r.Checks)) {
				t.Errorf("%s: no seed-like failure message in %+v", name, r.Checks)
			}
		case name == "fixed/stall":
			// Prefill while the handshake is pending: p50 a local prefill,
			// max the in-flight lookup's wait, within issue 8's [6, 8] s.
			if r.Faulted.P50 > 0.1 || r.Faulted.Max < 6 || r.Faulted.Max > 8 {
				t.Errorf("%s: faulted p50 %.3fs max %.3fs, want p50 <= 0.1s and max in [6, 8]", name, r.Faulted.P50, r.Faulted.Max)
			}
		default: // kill, remove: refused or reset connections, local prefill at once
			// (issue 8 allows a 0.5 s max; every one is a prefill's cost)
			if r.Faulted.P50 > 0.1 || r.Faulted.Max > 0.1 {
				t.Errorf("%s: faulted p50 %.3fs max %.3fs, want both <= 0.1s", name, r.Faulted.P50, r.Faulted.Max)
			}
		}
		if r.Case == "remove" {
			if r.Recovery != nil && r.Recovery.N > 0 {
				t.Errorf("%s: a removed source has no recovery, got %+v", name, *r.Recovery)
			}
		} else if r.Recovery == nil || r.Recovery.N == 0 || 2*r.Recovery.Pulled < r.Recovery.N {
			t.Errorf("%s: recovery %+v, want >= 50%% pulled again", name, r.Recovery)
		}
	}
	// The fake clock starts each trial on schedule: the stall holds its
	// rate × length trials, give or take the one on each edge.
	checkOpenLoopDuringStall(t, filepath.Join(out, "main-stall", "events.jsonl"), 500*time.Millisecond, 1)
	assertSeedTargets(t, out, 1, 500*time.Millisecond, virtualSlack)
	for _, f := range []string{"report.md", "junit.xml", "report.html", "main-stall/events.jsonl", "main-stall/report.html", "fixed-kill/timeline.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("slice output: %v", err)
		}
	}
	if !strings.Contains(r.stdout, "slice: 6 rows in ") {
		t.Errorf("no slice summary line:\n%s", tail(r.stdout, 5))
	}
	if t.Failed() {
		t.Logf("report.json:\n%s", data)
	}
	// The same slice on real processes must give the same table. It reads
	// this slice's output rather than running the virtual slice again.
	t.Run("real processes agree", func(t *testing.T) { realSliceAgrees(t, out) })
}

// burstS is what the waiters released together at a handshake deadline
// add to the first one's pull: its decode of the content tokens, after
// the first, one 55 ms step of the burst's recomputes a token (2048
// tokens at 26 µs, held to the 5 ms tick; sim/MODEL.md, the scheduler).
var burstS = float64(probe.DefaultContentTokens-1) * 0.055

// seedLikeFailure is the seed's failure of main's stall: the faulted
// max, the 30 s handshake deadline and the pull's costs (the burst of
// recomputes at the deadline adds up to 0.4 s), against the 15 s bound.
var seedLikeFailure = regexp.MustCompile(`a request naming the faulted source took 30\.[0-4]s \(bound 15\.0s\)`)

// offGrid adds --fault-at 10.1037s to args. The seed's 10 s falls on the
// trials' grid (one every 0.5 s) and on the engines' periodic timers, and
// on the fake clock whatever happens at the fault's very instant is
// concurrent with it: whether that trial counts in the window, or an
// engine's step runs before its freeze, would be the scheduler's choice
// (a remove row's n was 60 or 61, fixed stall's max 6.59 s or 6.61 s). At
// an instant no grid or timer of the run hits, every figure of the table
// is the same run to run.
func offGrid(args ...string) []string {
	return append(args, "--fault-at", "10.1037s")
}
