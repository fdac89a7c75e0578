package experiment_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/probe"
	"p2pfault/runner"
	"p2pfault/sim"
)

// seedRow is one row of the seed's table run on the virtual cluster.
type seedRow struct {
	arm, mode, kase string
	v               event.Verdict
}

func (r seedRow) String() string {
	s := r.v.Summary
	return fmt.Sprintf("%-5s %-3s %-6s passed=%-5v faulted n=%d pulled=%d p50=%.3fs max=%.3fs | healthy n=%d pulled=%d max=%.3fs | recovery n=%d pulled=%d",
		r.arm, r.mode, r.kase, r.v.Passed, s.Faulted.N, s.Faulted.Pulled, s.Faulted.P50.Seconds(), s.Faulted.Max.Seconds(),
		s.Healthy.N, s.Healthy.Pulled, s.Healthy.Max.Seconds(), s.Recovery.N, s.Recovery.Pulled)
}

// sliceEngines are the engines `p2pfault slice` starts for arm (cli's
// defaults): the arm's flags (sim.Arms), a kill's restart as long
// as a real vLLM's (29 s), KV loads that failed recomputed, the sim's own
// first start (1 s).
func sliceEngines(arm string) runner.Config {
	args, ok := sim.ArmArgs(arm)
	if !ok {
		panic("no simulated arm " + arm)
	}
	return runner.Config{
		ExtraArgs:         args,
		RestartDelay:      29 * time.Second,
		LoadFailurePolicy: "recompute",
	}
}

// seedFaultAt is the seed's fault time, 10 s, a millisecond early: at 10 s
// exactly a trial of source-0 is due too (one every 0.5 s from t0), and
// which of the two comes first at one instant of the bubble's clock is
// the scheduler's choice, as it is in real time. A millisecond apart, the
// fault goes first every time, and every figure of the table is the same
// run to run (with a tie a remove row counted 60 or 61 faulted pulls, and
// a pd kill's restart met a trial's legs at another phase:
// TestPDKillCanCostOnePullTheLoadTimeout).
const seedFaultAt = 10*time.Second - time.Millisecond

// seedTable runs every arm × mode × case of the seed's slice on the
// virtual cluster, each in a synctest bubble of its own at the seed's
// time (scale 1), with the content check on as the slice has it.
func seedTable(t *testing.T, modes []string, cases ...string) []seedRow {
	var rows []seedRow
	for _, arm := range []string{"main", "fixed"} {
		for _, mode := range modes {
			for _, kase := range cases {
				row := seedRow{arm: arm, mode: mode, kase: kase}
				ran := false // -run may pick some rows only
				t.Run(arm+"/"+mode+"/"+kase, func(t *testing.T) {
					ran = true
					synctest.Test(t, func(t *testing.T) {
						r := runVirtual(t, experiment.Config{
							Arm: arm, Mode: mode, Case: kase, ContentTokens: probe.DefaultContentTokens,
							FaultAt: seedFaultAt,
						}, sliceEngines(arm))
						if r.err != nil {
							t.Fatalf("Run: %v", r.err)
						}
						row.v = r.verdict
					})
				})
				if ran {
					rows = append(rows, row)
				}
			}
		}
	}
	return rows
}

func failedChecks(v event.Verdict) string {
	var out []string
	for _, c := range v.Checks {
		if !c.Passed {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return strings.Join(out, "; ")
}

// TestSeedTableOnTheVirtualCluster is the seed's table in pd mode, arms
// main and fixed × stall, kill and remove, on the engines `p2pfault
// slice` starts, at the seed's own time and bounds (scale 1), each row in
// a synctest bubble: the verdicts of the seed and of sim/MODEL.md, with
// the figures the fake clock makes exact asserted tighter than a
// real-time slice can. The p2p rows are cli's
// TestVirtualSliceGivesTheSeedsTable, through the command and with
// tighter bounds still (checkSeedRow judges them too, for the partition).
//   - pd stall fails on both arms (the prefill arm's fix is the P2P
//     pull's): the decode legs end on the handshake deadline (max in
//     [30 s, 30.1 s], never the load timeout + abort-ack's 40 s), and the
//     prefiller's CPU tier is full of parked stores, so (almost) nothing
//     hits again in the recovery window;
//   - kill and remove pass: refused or reset connections, local prefill at
//     once (p50 ≤ 100 ms); a removed source has no recovery window;
//   - everywhere: a healthy source keeps hitting (≥ 90 %, max ≤ 100 ms)
//     and every pull that returned 200 answered its source's text.
func TestSeedTableOnTheVirtualCluster(t *testing.T) {
	for _, r := range seedTable(t, []string{event.ModePD}, fault.ActionStall, fault.ActionKill, fault.ActionRemove) {
		checkSeedRow(t, r)
	}
}

// TestPartitionCaseOnTheVirtualCluster is case partition (source-0's
// host cut off from every other for 30 s) as rows of the table. The
// virtual network drops the packets as the firewall does (connects in the
// kernel's SYN backoff, no reset), and the rows are the stall's, as the
// README's real-time table has them (main partition FAIL 15.53 s /
// 30.03 s, 34/51 after recovery; fixed pass 0.02 s / 6.57 s): the same
// timers set them (the lookup deadline reaps the silent session, the
// reconnect dies at its 30 s handshake deadline; in pd the prefiller's
// CPU tier fills with parked stores as in its stall), so checkSeedRow
// judges them as stalls.
func TestPartitionCaseOnTheVirtualCluster(t *testing.T) {
	for _, r := range seedTable(t, []string{event.ModeP2P, event.ModePD}, fault.ActionPartition) {
		checkSeedRow(t, r)
	}
}

// checkSeedRow judges one row as the seed and sim/MODEL.md say it comes
// out (TestSeedTableOnTheVirtualCluster); a partition as a stall.
func checkSeedRow(t *testing.T, r seedRow) {
	t.Helper()
	const costs = 100 * time.Millisecond
	t.Log(r)
	name := r.arm + "/" + r.mode + "/" + r.kase
	s := r.v.Summary
	stall := r.kase == fault.ActionStall || r.kase == fault.ActionPartition
	wantPass := !(stall && (r.arm == "main" || r.mode == event.ModePD))
	if r.v.Passed != wantPass {
		t.Errorf("%s: passed %v, want %v; failed: %s", name, r.v.Passed, wantPass, failedChecks(r.v))
	}
	if c, ok := resultOf(&r.v, "content_matches"); !ok || !c.Passed {
		t.Errorf("%s: content_matches %+v, want a pass", name, c)
	}
	if s.Faulted.N == 0 || s.Healthy.N == 0 || 10*s.Healthy.Pulled < 9*s.Healthy.N || s.Healthy.Max > costs {
		t.Errorf("%s: faulted n=%d, healthy %+v: want faulted pulls, and healthy ones hitting (>= 90%%) within %v", name, s.Faulted.N, s.Healthy, costs)
	}
	switch {
	case stall && !wantPass:
		// The waiters are all released at the handshake deadline and
		// recompute together: the first of them, served first, decodes its
		// content tokens after the first one step each, each step one of
		// the burst's full steps (2048 tokens at 26 µs, held to the 5 ms
		// tick: 55 ms; sim/MODEL.md, the scheduler).
		burst := time.Duration(probe.DefaultContentTokens-1) * 55 * time.Millisecond
		if s.Faulted.Max < 30*time.Second || s.Faulted.Max > 30*time.Second+costs+burst {
			t.Errorf("%s: faulted max %v, want the 30s handshake deadline plus the pull's costs and its decode in the burst (<= %v)", name, s.Faulted.Max, costs+burst)
		}
		if s.Faulted.P50 < 8*time.Second || s.Faulted.P50 > 24*time.Second {
			t.Errorf("%s: faulted p50 %v, want in [8s, 24s]", name, s.Faulted.P50)
		}
		if !strings.Contains(failedChecks(r.v), "a request naming the faulted source took") {
			t.Errorf("%s: no seed-like failure message in %s", name, failedChecks(r.v))
		}
	case stall:
		if s.Faulted.P50 > costs || s.Faulted.Max >= 8*time.Second {
			t.Errorf("%s: faulted p50 %v, max %v: want p50 <= %v and max below the 8s lookup timeout", name, s.Faulted.P50, s.Faulted.Max, costs)
		}
	default:
		if s.Faulted.P50 > costs {
			t.Errorf("%s: faulted p50 %v, want <= %v", name, s.Faulted.P50, costs)
		}
	}
	switch {
	case r.kase == fault.ActionRemove:
		if s.Recovery.N > 0 {
			t.Errorf("%s: a removed source has no recovery, got %+v", name, s.Recovery)
		}
	case stall && r.mode == event.ModePD:
		if s.Recovery.N == 0 || 10*s.Recovery.Pulled > s.Recovery.N {
			t.Errorf("%s: recovery %+v, want (almost) no hit: the prefiller's CPU tier is full of parked stores", name, s.Recovery)
		}
	default:
		if s.Recovery.N == 0 || 2*s.Recovery.Pulled < s.Recovery.N {
			t.Errorf("%s: recovery %+v, want >= 50%% hits", name, s.Recovery)
		}
	}
}

// TestPDKillCanCostOnePullTheLoadTimeout: a pd kill restarts the
// prefiller on the same ports after the fault window. A trial whose
// prefill leg is refused while it is down, but whose decode leg's new
// session connects just as it is back, sends its fetch to a prefiller
// that never held those blocks: on main nothing answers it, and the pull
// waits the 30 s load timeout (plus its costs) before it prefills
// locally; every other pull of the window prefills at once. Whether a
// trial meets that moment is a matter of phase (cli's slice test allows
// main/pd/kill "a pass or the load timeout"), so the kill is swept over a
// few milliseconds around 10 s: each run passes or fails faulted_max alone
// with exactly that pull, and at least one of them meets it.
func TestPDKillCanCostOnePullTheLoadTimeout(t *testing.T) {
	met := 0
	// Never 10 s itself: a trial of source-0 is due then too (seedFaultAt).
	// Only kills from 9.991 to 9.995 s meet it on these figures, and at the
	// window's edges which of two goroutines goes first at one instant of
	// the bubble's clock decides (9.995 s missed once in twelve under load,
	// failing CI): 9.993 s is its middle.
	for _, ms := range []int{-15, -10, -7, 1} {
		at := 10*time.Second + time.Duration(ms)*time.Millisecond
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := runVirtual(t, experiment.Config{Mode: event.ModePD, Case: fault.ActionKill, FaultAt: at}, sliceEngines("main"))
				if r.err != nil {
					t.Fatalf("Run: %v", r.err)
				}
				s := r.verdict.Summary
				timedOut := s.Faulted.Max >= 30*time.Second
				if s.Faulted.P50 > 100*time.Millisecond || (timedOut && s.Faulted.Max > 30*time.Second+100*time.Millisecond) || (!timedOut && s.Faulted.Max > time.Second) {
					t.Errorf("faulted %+v: want local prefills, and at most one pull of the 30s load timeout plus costs", s.Faulted)
				}
				if timedOut {
					met++
					if n := loadTimeouts(r.events); n != 1 {
						t.Errorf("%d pulls ended by the load timeout, want the one", n)
					}
				}
				for _, c := range r.verdict.Checks {
					if !c.Passed && !(timedOut && c.Name == "faulted_max") {
						t.Errorf("%s failed: %s", c.Name, c.Detail)
					}
				}
			})
		})
	}
	if met == 0 {
		t.Error("no kill of the sweep cost a pull the load timeout: the restarted prefiller answered every fetch (or none met it)")
	}
}

// loadTimeouts counts the pulls whose cause is the load timeout.
func loadTimeouts(evs []event.Event) int {
	n := 0
	for _, ev := range evs {
		for _, s := range ev.Samples {
			if s.Cause == event.CauseLoadTimeout {
				n++
			}
		}
	}
	return n
}
