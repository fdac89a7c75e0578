package experiment_test

import (
	"context"
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
	"p2pfault/vcluster"
)

// cutAt is a virtual cluster whose source-0 the test cuts off at cut
// after t0 and heals at heal: a break p2pfault did not make (no window of
// its own), as a deployment's link fails by itself.
type cutAt struct {
	vcluster.Opener
	opened chan experiment.Cluster
}

func (o cutAt) Open(ctx context.Context, env experiment.OpenEnv) (experiment.Cluster, error) {
	cl, err := o.Opener.Open(ctx, env)
	if err == nil {
		o.opened <- cl
	}
	return cl, err
}

// TestAWindowWhoseSourceStoppedHittingIsNotJudged: source-0's host is cut
// off 4 s into the run, 6 s before its scripted stall fires; its pulls
// miss from then on (the decoder's lookup deadline reaps the silent
// session, each new one dies at its handshake deadline, 1 s each here), so
// when the stall fires its baseline has stopped hitting. The window is
// invalid, not failed: the verdict names it and why, no check of it
// counts, and the run's exit is 3.
func TestAWindowWhoseSourceStoppedHittingIsNotJudged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcfg := runner.Config{
			ExtraArgs:        []string{"--sim-startup-delay=0s", "--p2p-pending-handshake=prefill", "--sim-lookup-timeout=1s"},
			HandshakeTimeout: time.Second,
		}
		o := cutAt{Opener: vcluster.Opener{Config: rcfg, Seed: 1}, opened: make(chan experiment.Cluster, 1)}
		evs, v, err := watchExperiment(t, experiment.Config{
			Case: fault.ActionStall, FaultAt: 10 * time.Second, FaultFor: 5 * time.Second, Recovery: 5 * time.Second,
			SeedTimeout: time.Second, Cluster: o,
		}, func(ev event.Event) {
			if ev.Kind != event.KindPhase || ev.Phase != event.PhaseBaseline {
				return
			}
			// The cluster is open by the baseline (its one phase event):
			// its network cuts source-0 off 4 s into it and heals it 8 s
			// after.
			cl := <-o.opened
			nw, err := cl.(interface{ FaultNetwork() (fault.Network, error) }).FaultNetwork()
			if err != nil {
				t.Errorf("FaultNetwork: %v", err)
				return
			}
			cut, heal := time.After(4*time.Second), time.After(12*time.Second)
			go func() {
				<-cut
				src := cl.Sources()[0].(fault.NetTarget)
				if err := nw.Partition(src.Name(), src.Ports()...); err != nil {
					t.Errorf("partition: %v", err)
				}
				<-heal
				if err := nw.Heal("source-0"); err != nil {
					t.Errorf("heal: %v", err)
				}
			}()
		})
		var end event.Event
		for _, ev := range evs {
			if ev.Kind == event.KindEnd {
				end = ev
			}
		}
		t.Logf("not judged: %q", v.NotJudged)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(v.NotJudged) != 1 || !strings.Contains(v.NotJudged[0], "window 1 (stall source-0 at 10.0s): source-0's baseline had stopped hitting before its fault fired") {
			t.Fatalf("not judged %q, want window 1 named with its reason; checks %+v", v.NotJudged, v.Checks)
		}
		if v.Passed || v.Failed() {
			t.Errorf("passed %v failed %v, want neither: checks %+v", v.Passed, v.Failed(), v.Checks)
		}
		for _, c := range v.Checks {
			if c.Name == check.NameFaultedBound || c.Name == check.NameRecovery {
				t.Errorf("the run's checks hold %s of the window not judged", c.Name)
			}
		}
		if got := check.Outcome(v); got != exitcode.ErrNotJudged {
			t.Errorf("outcome %v, want %v", got, exitcode.ErrNotJudged)
		}
		if end.ExitCode != exitcode.NotJudged {
			t.Errorf("end event's exit code %d, want %d", end.ExitCode, exitcode.NotJudged)
		}
		if len(v.Windows) != 1 || v.Windows[0].NotJudged == "" || v.Windows[0].Passed {
			t.Errorf("windows %+v: want the one window not judged", v.Windows)
		}
	})
}

// misaddressed is a virtual cluster whose source-0 the probe names at a
// P2P port nothing listens on: a port mis-addressed.
type misaddressed struct{ vcluster.Opener }

func (o misaddressed) Open(ctx context.Context, env experiment.OpenEnv) (experiment.Cluster, error) {
	cl, err := o.Opener.Open(ctx, env)
	if err != nil {
		return nil, err
	}
	return misaddressedCluster{cl.(*vcluster.Cluster)}, nil
}

type misaddressedCluster struct{ *vcluster.Cluster }

func (c misaddressedCluster) Sources() []experiment.Target {
	ts := c.Cluster.Sources()
	ts[0] = wrongPort{ts[0]}
	return ts
}

type wrongPort struct{ experiment.Target }

func (w wrongPort) P2PPort() int { return w.Target.P2PPort() + 100 }

// TestAPortMisaddressedIsNotJudgedAndSaysWhy: the pulls name source-0 at a
// P2P port nothing listens on; the decoder's every connect is refused (the
// sim's log says so, real vLLM's would not, and p2pfault's own connect is
// refused too), so the warm-up never hits there: exit 3, cause refused.
func TestAPortMisaddressedIsNotJudgedAndSaysWhy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rcfg := runner.Config{Sources: 2, ExtraArgs: []string{"--sim-startup-delay=0s"}}
		_, _, err := runExperiment(t, experiment.Config{Case: fault.ActionStall, WarmupTimeout: 5 * time.Second,
			Cluster: misaddressed{vcluster.Opener{Config: rcfg, Seed: 1}}})
		if exitcode.Code(err) != exitcode.NotJudged {
			t.Fatalf("exit %d (%v), want %d", exitcode.Code(err), err, exitcode.NotJudged)
		}
		msg := err.Error()
		t.Log(msg)
		for _, want := range []string{
			"source 0 (P2P 127.0.0.1:7877) not handshaken within 5s",
			"cause (refused): connection refused on source-0's P2P port: the decoder's log reports its connects to 127.0.0.1:7877 refused",
			"nothing listens there",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("error lacks %q:\n%s", want, msg)
			}
		}
		if strings.Contains(msg, "source 1") {
			t.Errorf("source-1 warmed up and is named:\n%s", msg)
		}
	})
}
