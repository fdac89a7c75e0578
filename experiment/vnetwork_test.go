package experiment_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

// virtualNetRun starts an experiment on a timeline with network faults on
// the virtual cluster (in the caller's bubble) and returns its event
// recorder and a channel with Run's error.
func virtualNetRun(t *testing.T, recovery time.Duration, timeline string) (*recorder, <-chan error) {
	t.Helper()
	exp, err := experiment.New(experiment.Config{
		Case:     fault.CaseNone,
		Timeline: timeline,
		Recovery: recovery,
		Cluster:  vcluster.Opener{Seed: 1, Config: runner.Config{ExtraArgs: []string{"--sim-startup-delay=0s"}}},
		OutDir:   t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{ch: exp.Subscribe()}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	done := make(chan struct{})
	go func() { defer close(done); _, err := exp.Run(ctx); errc <- err }()
	t.Cleanup(func() { cancel(); <-done })
	return rec, errc
}

// TestLossRaisesFailedOrSlowPullsOfThatSourceOnly: `loss 30%` on source-0
// in a timeline. A pull counts as failed or slow when it is not a hit or
// took over 250 ms (healthy pulls take ~30 ms). The share of such pulls
// naming source-0 rises in the fault window; source-1's pulls are not
// touched by the loss: every one hits and their median stays a healthy
// pull's. On the virtual cluster, in a synctest bubble at the seed's time:
// its network delays a lost segment by TCP's retransmission timeout, as the
// kernel does, and draws its losses from the cluster's seed. What source-1
// shares with source-0 is the decoder's scheduler loop: when the loss gets
// source-0's session reaped (a reset, a handshake deadline), the tens of
// pulls waiting on it miss together and prefill locally, a few per step
// (sim/MODEL.md mechanism 18, first come first served), and a source-1 pull
// sent then waits behind them (seen: 280–410 ms, in about 1 run of 15 under
// load, as which goroutine a reconnect's instant wakes first decides when
// the reap falls). So each of source-1's slow pulls must have met such a
// burst: at least 5 of source-0's misses ending while it was in flight.
func TestLossRaisesFailedOrSlowPullsOfThatSourceOnly(t *testing.T) {
	synctest.Test(t, testLossRaisesFailedOrSlowPullsOfThatSourceOnly)
}

func testLossRaisesFailedOrSlowPullsOfThatSourceOnly(t *testing.T) {
	rec, errc := virtualNetRun(t, 8*time.Second, "at 8s loss 30% source-0 for 40s")
	for ev := range rec.ch {
		rec.seen = append(rec.seen, ev)
	}
	if err := <-errc; err != nil {
		t.Fatalf("run: %v", err)
	}
	var from, to time.Duration
	for _, ev := range rec.seen {
		if ev.Kind == event.KindWindow {
			from, to = ev.Window.Start, ev.Window.End
		}
	}
	if to == 0 {
		t.Fatal("no closed fault window")
	}
	type tally struct{ n, bad int }
	var base, during [2]tally
	var healthy []time.Duration // source-1's latencies in the window
	missed1 := 0                // source-1's pulls in the window that did not hit
	var slow1 []event.Sample    // and those that hit, slowly
	for _, ev := range rec.seen {
		if ev.Kind != event.KindSamples {
			continue
		}
		for _, s := range ev.Samples {
			if s.Source > 1 || s.Aborted {
				continue
			}
			tl := &base[s.Source]
			switch {
			case s.Start >= from && s.Start < to:
				tl = &during[s.Source]
				if s.Source == 1 {
					healthy = append(healthy, s.Latency)
					if !s.Hit() {
						missed1++
					} else if badPull(s) {
						slow1 = append(slow1, s)
					}
				}
			case s.Start >= from:
				continue // recovery
			}
			tl.n++
			if badPull(s) {
				tl.bad++
			}
		}
	}
	share := func(x tally) float64 { return float64(x.bad) / float64(max(x.n, 1)) }
	t.Logf("failed or slow pulls (not a hit, or over 250 ms): source-0 baseline %d/%d (%.2f), under loss 30%% %d/%d (%.2f); source-1 baseline %d/%d (%.2f), meanwhile %d/%d (%.2f)",
		base[0].bad, base[0].n, share(base[0]), during[0].bad, during[0].n, share(during[0]),
		base[1].bad, base[1].n, share(base[1]), during[1].bad, during[1].n, share(during[1]))
	if during[0].n < 30 || during[1].n < 30 {
		t.Fatalf("too few pulls in the window to judge: %d and %d", during[0].n, during[1].n)
	}
	if share(during[0]) < share(base[0])+0.15 {
		t.Errorf("source-0's share of failed or slow pulls rose from %.2f to only %.2f under loss 30%%", share(base[0]), share(during[0]))
	}
	slices.Sort(healthy)
	if p50 := healthy[len(healthy)/2]; p50 > 250*time.Millisecond || missed1 > 0 {
		t.Errorf("source-1's pulls while source-0 lost packets: median %v, %d of %d not hits; want the median under 250ms and every one a hit",
			p50, missed1, during[1].n)
	}
	for _, slow := range slow1 {
		if n := missesEndingIn(rec.seen, 0, slow.Start, slow.Start+slow.Latency); n < 5 {
			t.Errorf("source-1's pull sent at %v took %v, and only %d of source-0's misses ended meanwhile: no burst of local prefills explains it", slow.Start, slow.Latency, n)
		}
	}
}

func badPull(s event.Sample) bool { return !s.Hit() || s.Latency > 250*time.Millisecond }

// missesEndingIn counts the pulls naming source that missed (no P2P hit)
// and ended between from and to.
func missesEndingIn(evs []event.Event, source int, from, to time.Duration) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind != event.KindSamples {
			continue
		}
		for _, s := range ev.Samples {
			if end := s.Start + s.Latency; s.Source == source && !s.Hit() && !s.Aborted && end >= from && end <= to {
				n++
			}
		}
	}
	return n
}

// TestPartitionKeysOnAVirtualRun: on the dashboard of a run of the
// virtual cluster (in a synctest bubble), n partitions the selected
// source for the run's stall length and h heals it. Each is verified from
// p2pfault's side of the cluster's own network: during the partition a
// connect to the source's P2P port hangs for the whole second, after the
// heal one completes; no firewall is asked for (the cluster cuts its own
// links). Quitting ends the run as interrupted.
func TestPartitionKeysOnAVirtualRun(t *testing.T) {
	synctest.Test(t, testPartitionKeysOnAVirtualRun)
}

func testPartitionKeysOnAVirtualRun(t *testing.T) {
	exp, err := experiment.New(experiment.Config{
		Case:    fault.CaseNone,
		Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{ExtraArgs: []string{"--sim-startup-delay=0s"}}},
		OutDir:  t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{ch: exp.Subscribe()}
	tm := bubbleDashboard(t, exp, 140, 45)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := exp.Run(ctx); errc <- err }()
	stopped := false
	t.Cleanup(func() {
		cancel()
		if !stopped {
			<-errc
		}
		_ = tm.Quit()
		tm.WaitFinished(t)
	})
	rec.waitFor(t, "the baseline", time.Minute, func(ev event.Event) bool {
		return ev.Kind == event.KindPhase && ev.Phase == event.PhaseBaseline
	})

	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("n")})
	ev := rec.waitFor(t, "the keyed partition", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindFault && ev.Fault.Action == fault.ActionPartition && ev.Fault.By == "key"
	})
	if ev.Fault.Err != "" || ev.Fault.Source != 0 {
		t.Fatalf("n: %+v", ev.Fault)
	}
	// A key's partition lasts the run's stall length, 30 s.
	if ev.Fault.Duration != experiment.DefaultFaultFor {
		t.Errorf("the keyed partition lasts %v, want %v", ev.Fault.Duration, experiment.DefaultFaultFor)
	}
	pv := rec.seenOrWait(t, "the partition's verification", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindVerification && ev.Verification.Action == fault.ActionPartition
	}).Verification
	if !pv.Verified || !strings.Contains(pv.Detail, "hangs") || !strings.Contains(pv.Detail, "the cluster holds partition on its links") {
		t.Errorf("partition verification %+v: want a connect seen hanging and the cut the cluster reports", *pv)
	}

	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("h")})
	rec.waitFor(t, "the keyed heal", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindFault && ev.Fault.Action == fault.ActionHeal && ev.Fault.By == "key" && ev.Fault.Err == ""
	})
	// The verification may come before the heal's own event: both are
	// sent at the instant of the heal, from two goroutines.
	hv := rec.seenOrWait(t, "the heal's verification", 10*time.Second, func(ev event.Event) bool {
		return ev.Kind == event.KindVerification && ev.Verification.Action == fault.ActionHeal
	}).Verification
	// A connect on the in-memory network completes at once.
	if !hv.Verified || hv.After != 0 || !strings.Contains(hv.Detail, "no cut") {
		t.Errorf("heal verification %+v: want a connect completing at once, and no cut reported", *hv)
	}

	cancel()
	err = <-errc
	stopped = true
	if !errors.Is(err, exitcode.ErrInterrupted) {
		t.Errorf("run after quit: %v, want interrupted", err)
	}
	for _, ev := range rec.seen {
		if ev.Kind == event.KindWarning {
			t.Errorf("warning: %s", ev.Message)
		}
	}
}

// seenOrWait is the first event already seen that ok accepts, or else the
// next one to come (waitFor).
func (r *recorder) seenOrWait(t *testing.T, what string, limit time.Duration, ok func(event.Event) bool) event.Event {
	t.Helper()
	for _, ev := range r.seen {
		if ok(ev) {
			return ev
		}
	}
	return r.waitFor(t, what, limit, ok)
}
