package experiment_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
)

// TestSeveralDecodersOnTheVirtualCluster: two sources, two decoders
// (--decoders 2), a stall of source-0, on the virtual cluster in a
// synctest bubble. The run says it has two decoders and sends both
// decoders' states by name; each source's trials go to both decoders in
// turn, each sample naming its own; the verdict breaks every source's
// pulls down by decoder, and the healthy pairs hit throughout while the
// stalled source's pulls through both decoders miss in its window.
func TestSeveralDecodersOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s stall source-0 for 10s", Duration: 30 * time.Second},
			runner.Config{Decoders: 2})
		engines, pairs := map[string]bool{}, map[string]int{}
		for _, ev := range evs {
			switch ev.Kind {
			case event.KindRun:
				if ev.Run.Decoders != 2 {
					t.Errorf("run decoders %d, want 2", ev.Run.Decoders)
				}
			case event.KindEngine:
				engines[ev.Engine.Name] = true
			case event.KindSamples:
				for _, s := range ev.Samples {
					pairs[fmt.Sprintf("source-%d decoder-%d", s.Source, s.Decoder)]++
				}
			}
		}
		for _, name := range []string{"decoder-0", "decoder-1", "source-0", "source-1"} {
			if !engines[name] {
				t.Errorf("no engine event for %s (got %v)", name, engines)
			}
		}
		if engines["decoder"] {
			t.Error(`a run of two decoders named one "decoder"`)
		}
		for _, p := range []string{"source-0 decoder-0", "source-0 decoder-1", "source-1 decoder-0", "source-1 decoder-1"} {
			if pairs[p] < 10 {
				t.Errorf("%d samples of %s, want ≥ 10 (all: %v)", pairs[p], p, pairs)
			}
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

// decoderChecks are v's checks of a decoder's fault, by name.
func decoderChecks(v event.Verdict) map[string]event.Result {
	m := map[string]event.Result{}
	for _, c := range v.Checks {
		if check.IsDecoderCheck(c.Name) {
			m[c.Name] = c
		}
	}
	return m
}

// TestAStalledDecoderIsJudgedOnItsOwn: stall decoder-1 of two for 10 s on
// the virtual cluster (a synctest bubble). The stall acts on the decoder
// (its fault events name it; its pulls in the stall miss or wait) and
// leaves the sources up; the verdict passes on the two decoder checks:
// the pulls through decoder-0 kept hitting, and decoder-1's hit again
// after; no source window opened, and the run's fault_window is not
// failed for it.
func TestAStalledDecoderIsJudgedOnItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s stall decoder-1 for 10s", Duration: 40 * time.Second},
			runner.Config{Decoders: 2})
		var actions []string
		stalled, other := 0, 0
		for _, ev := range evs {
			switch ev.Kind {
			case event.KindFault:
				actions = append(actions, ev.Fault.Action+" "+ev.Fault.TargetName())
			case event.KindWindow:
				t.Errorf("a source window opened: %+v", ev.Window)
			case event.KindSamples:
				for _, s := range ev.Samples {
					in := s.Start >= 10*time.Second && s.Start < 20*time.Second
					switch {
					case in && s.Decoder == 1 && (!s.Hit() || s.Latency > time.Second):
						stalled++
					case in && s.Decoder == 0 && !s.Hit():
						other++
					}
				}
			}
		}
		if want := []string{"stall decoder-1", "resume decoder-1"}; !slices.Equal(actions, want) {
			t.Errorf("fault actions %q, want %q", actions, want)
		}
		if stalled == 0 || other != 0 {
			t.Errorf("in the stall: %d pulls through decoder-1 missed or waited (want some), %d through decoder-0 missed (want none)", stalled, other)
		}
		got := decoderChecks(v)
		for _, n := range []string{check.NameHealthyDecoders, check.NameDecoderRecovers} {
			if c, ok := got[n]; !ok || !c.Passed || c.Empty {
				t.Errorf("%s = %+v (present %v), want passed", n, c, ok)
			}
		}
		if !v.Passed {
			t.Errorf("verdict failed: %+v", v.Checks)
		}
	})
}

// TestAKilledDecoderRestartsOnItsPortsAndHitsAgain: kill decoder-1 of two.
// It restarts on the same ports (no address event: the probe keeps
// naming it) and its pulls hit again after (faulted_decoder_hits_again),
// while decoder-0's kept hitting throughout.
func TestAKilledDecoderRestartsOnItsPortsAndHitsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s kill decoder-1", Duration: 40 * time.Second},
			runner.Config{Decoders: 2})
		ports := map[int]bool{}
		restarted := false
		for _, ev := range evs {
			switch {
			case ev.Kind == event.KindEngine && ev.Engine.Name == "decoder-1":
				ports[ev.Engine.P2PPort] = true
				restarted = restarted || ev.Engine.State == event.StateRestarting
			case ev.Kind == event.KindAddress && ev.Address.Prev != "":
				t.Errorf("an address changed: %+v", ev.Address)
			}
		}
		if !restarted || len(ports) != 1 {
			t.Errorf("decoder-1 restarted %v on P2P ports %v, want a restart on one port", restarted, ports)
		}
		got := decoderChecks(v)
		for _, n := range []string{check.NameHealthyDecoders, check.NameDecoderRecovers} {
			if c := got[n]; !c.Passed || c.Empty {
				t.Errorf("%s = %+v, want passed", n, c)
			}
		}
	})
}

// TestAReplacedDecoderGetsThePullsAtItsNewAddress: replace decoder-1
// (its engine killed, a new one on new ports): from the moment the new one
// is ready the probe sends decoder-1's pulls to it, so they hit again, and
// none went to the new address before that.
func TestAReplacedDecoderGetsThePullsAtItsNewAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s replace decoder-1", Duration: 40 * time.Second},
			runner.Config{Decoders: 2})
		urls := map[int]bool{}
		for _, ev := range evs {
			if ev.Kind == event.KindEngine && ev.Engine.Name == "decoder-1" {
				urls[ev.Engine.HTTPPort] = true
			}
		}
		if len(urls) != 2 {
			t.Errorf("decoder-1 served on HTTP ports %v, want two: the replaced engine's and the new one's", urls)
		}
		got := decoderChecks(v)
		for _, n := range []string{check.NameHealthyDecoders, check.NameDecoderRecovers} {
			if c := got[n]; !c.Passed || c.Empty {
				t.Errorf("%s = %+v, want passed (pulls through decoder-1 go to its new engine)", n, c)
			}
		}
	})
}

// TestAPartitionOfOnePairLeavesTheOtherPairsUntouched: partition source-0
// from decoder-1 for 30 s, two sources and two decoders, on the virtual
// cluster. (A 10 s partition, of a pair or of the whole source alike,
// ends while the handshake begun in it waits its 30 s deadline, so its
// recovery window sees no hit: not what this test is about.) The pulls of that pair in the cut miss or wait; the other
// three pairs' pulls all hit as fast as before it (under 1 s); the
// decoder checks pass on every other pair and on the pair after the heal.
func TestAPartitionOfOnePairLeavesTheOtherPairsUntouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s partition source-0 from decoder-1 for 30s", Duration: 70 * time.Second},
			runner.Config{Decoders: 2})
		cut, others, slowOthers := 0, 0, 0
		var actions []string
		for _, ev := range evs {
			switch ev.Kind {
			case event.KindFault:
				actions = append(actions, ev.Fault.Action+" "+ev.Fault.TargetName())
			case event.KindSamples:
				for _, s := range ev.Samples {
					if s.Start < 10*time.Second || s.Start >= 40*time.Second {
						continue
					}
					switch {
					case s.Source == 0 && s.Decoder == 1:
						if !s.Hit() || s.Latency > time.Second {
							cut++
						}
					case !s.Hit() || s.Latency > time.Second:
						slowOthers++
					default:
						others++
					}
				}
			}
		}
		if want := []string{"partition source-0 from decoder-1", "heal source-0 from decoder-1"}; !slices.Equal(actions, want) {
			t.Errorf("fault actions %q, want %q", actions, want)
		}
		if cut == 0 || others < 30 || slowOthers != 0 {
			t.Errorf("in the cut: %d pulls of the pair missed or waited (want some); other pairs %d hit fast (want ≥ 30), %d did not (want 0)",
				cut, others, slowOthers)
		}
		got := decoderChecks(v)
		for _, n := range []string{check.NameHealthyDecoders, check.NameDecoderRecovers} {
			if c := got[n]; !c.Passed || c.Empty || !strings.Contains(c.Detail, "source-0 from decoder-1") {
				t.Errorf("%s = %+v, want passed on source-0 from decoder-1", n, c)
			}
		}
	})
}

// TestAPairIsRefusedOnProcesses: on a cluster of processes (a plan
// without its own network) a timeline with a pair is a usage error before
// anything starts, saying why a port rule cannot cut one pair.
func TestAPairIsRefusedOnProcesses(t *testing.T) {
	_, err := experiment.New(experiment.Config{Cluster: processesPlan{}, Timeline: "at 1s partition source-0 from decoder", OutDir: t.TempDir()})
	if err == nil || exitcode.Code(err) != exitcode.Usage || !errors.Is(err, fault.ErrNoPairs) {
		t.Errorf("err = %v, want a usage error wrapping fault.ErrNoPairs", err)
	}
}

// processesPlan plans a cluster of processes (two sources, one decoder,
// the host's network); it is never opened.
type processesPlan struct{ experiment.Opener }

func (processesPlan) Plan(fault.Timeline) (experiment.Plan, error) {
	return experiment.Plan{Sources: 2, Model: runner.DefaultModel, Engine: "sim"}, nil
}

// TestARemovedDecoderEndsTheRun: remove decoder-1 of two, with no
// --duration: the run still ends (FaultFor after the removal, as after a
// source's) and judges only healthy_decoders_keep_hitting, since a removed
// decoder never comes back to hit again.
func TestARemovedDecoderEndsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, v := mustRunVirtual(t, experiment.Config{Timeline: "at 10s remove decoder-1"}, runner.Config{Decoders: 2})
		got := decoderChecks(v)
		if c := got[check.NameHealthyDecoders]; !c.Passed || c.Empty {
			t.Errorf("%s = %+v, want passed", check.NameHealthyDecoders, c)
		}
		if c, ok := got[check.NameDecoderRecovers]; ok {
			t.Errorf("a removed decoder judged on %s: %+v", check.NameDecoderRecovers, c)
		}
	})
}

// TestHealEndsACutOnOnePair: a partition of source-0 from decoder-1
// without "for", ended by `heal source-0 from decoder-1`: the heal is
// verified from what the cluster holds on the link (none), and the pair's
// pulls hit again after it.
func TestHealEndsACutOnOnePair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, v := mustRunVirtual(t, experiment.Config{
			Timeline: "at 10s partition source-0 from decoder-1; at 40s heal source-0 from decoder-1", Duration: 70 * time.Second},
			runner.Config{Decoders: 2})
		var verified []string
		for _, ev := range evs {
			if ev.Kind == event.KindVerification {
				verified = append(verified, fmt.Sprintf("%s %s %v: %s", ev.Verification.Action, ev.Verification.TargetName(), ev.Verification.Verified, ev.Verification.Detail))
			}
		}
		want := []string{
			`partition source-0 from decoder-1 true: the cluster holds "partition" on the link source-0–decoder-1 alone`,
			`heal source-0 from decoder-1 true: the cluster holds no cut on the link source-0–decoder-1`,
		}
		if !slices.Equal(verified, want) {
			t.Errorf("verifications:\n%s\nwant:\n%s", strings.Join(verified, "\n"), strings.Join(want, "\n"))
		}
		if c := decoderChecks(v)[check.NameDecoderRecovers]; !c.Passed || c.Empty {
			t.Errorf("%s = %+v, want passed", check.NameDecoderRecovers, c)
		}
	})
}
