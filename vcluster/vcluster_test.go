package vcluster_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

// open starts a virtual cluster of two sources and a decoder in the
// caller's bubble, stopped at cleanup.
func open(t *testing.T, changes *[]event.EngineInfo) *vcluster.Cluster {
	t.Helper()
	return openConfig(t, runner.Config{}, changes)
}

// openConfig is open with cfg (its ExtraArgs replaced).
func openConfig(t *testing.T, cfg runner.Config, changes *[]event.EngineInfo) *vcluster.Cluster {
	t.Helper()
	cfg.ExtraArgs = []string{"--sim-startup-delay=0s"}
	o := vcluster.Opener{Seed: 1, Config: cfg}
	p, err := o.Plan(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Sources != 2 || p.Engine != vcluster.Engine || !p.OwnNetwork || p.Model != runner.DefaultModel {
		t.Fatalf("plan %+v", p)
	}
	cl, err := o.Open(context.Background(), experiment.OpenEnv{
		OutDir: t.TempDir(), TimeScale: 1,
		OnChange: func(in event.EngineInfo) {
			if changes != nil {
				*changes = append(*changes, in)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return cl.(*vcluster.Cluster)
}

// TestTargetsActAsTheKernelDoesOnAProcess: a stall freezes the engine
// (its report says so, its state is stopped, its HTTP port still takes
// connects into the backlog), a kill brings a new instance up on the same
// ports, a terminate leaves its ports refusing, a restore brings it back,
// a replace a new instance on new ports; none has a pid.
func TestTargetsActAsTheKernelDoesOnAProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := open(t, nil)
		src := cl.Sources()[0].(*vcluster.Target)
		ctx := context.Background()
		httpAddr := net.JoinHostPort(runner.Host, "8100")
		if src.HTTPURL() != "http://"+httpAddr || src.P2PAddr() != "127.0.0.1:7777" {
			t.Fatalf("source-0 at %s, P2P %s: want the runner's planned ports", src.HTTPURL(), src.P2PAddr())
		}
		r := src.Report()
		if !r.Running || r.Frozen || r.Instance != 1 || r.Ready(ctx) != nil {
			t.Fatalf("report at start %+v (ready: %v)", r, r.Ready(ctx))
		}

		if _, err := src.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if st := src.State(); st.State != event.StateStopped || st.Pid != 0 || st.Sid != 0 {
			t.Errorf("state while stalled %+v: want stopped, no pid", st)
		}
		if !src.Report().Frozen {
			t.Error("report while stalled: not frozen")
		}
		c, err := cl.Network().DialContext(ctx, "tcp", httpAddr)
		if err != nil {
			t.Errorf("a connect to a frozen engine: %v, want it in the backlog", err)
		} else {
			c.Close()
		}
		if err := src.Continue(ctx); err != nil || src.Report().Frozen {
			t.Fatalf("continue: %v, frozen %v", err, src.Report().Frozen)
		}

		var killedAt time.Time
		ready, err := src.Kill(ctx, func(at time.Time, err error) { killedAt = at })
		if err != nil || killedAt.IsZero() || ready.Before(killedAt) {
			t.Fatalf("kill: ready %v, killed %v, %v", ready, killedAt, err)
		}
		if r := src.Report(); r.Instance != 2 || !r.Running || src.P2PAddr() != "127.0.0.1:7777" || src.State().Restarts != 1 {
			t.Errorf("after the kill: report %+v, P2P %s, state %+v: want instance 2 on the same ports, one restart", r, src.P2PAddr(), src.State())
		}

		if err := src.Terminate(ctx, nil); err != nil {
			t.Fatal(err)
		}
		_, err = cl.Network().DialContext(ctx, "tcp", httpAddr)
		if !errors.Is(err, syscall.ECONNREFUSED) || src.Report().Running || src.State().State != event.StateRemoved {
			t.Errorf("after terminate: dial %v, report %+v, state %s: want refused, not running, removed", err, src.Report(), src.State().State)
		}
		if _, err := src.Restore(ctx); err != nil || src.Report().Ready(ctx) != nil {
			t.Fatalf("restore: %v", err)
		}

		var _ fault.Replacer = src
		if _, err := src.Replace(ctx, nil); err != nil {
			t.Fatal(err)
		}
		r = src.Report()
		if r.Instance != 4 || src.P2PAddr() == "127.0.0.1:7777" || src.HTTPURL() == "http://"+httpAddr || r.Ready(ctx) != nil {
			t.Errorf("after the replace: report %+v at %s, P2P %s: want instance 4 on new ports, ready", r, src.HTTPURL(), src.P2PAddr())
		}
		if _, err := cl.Network().DialContext(ctx, "tcp", httpAddr); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("the replaced engine's old HTTP port: %v, want refused", err)
		}
	})
}

// TestFaultNetworkCutsTheHost: a partition makes connects to the
// source's P2P port hang (until the dialer gives up) and a heal lets
// them complete again, the target's report saying which cut it holds; no
// host firewall is touched.
func TestFaultNetworkCutsTheHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := open(t, nil)
		src := cl.Sources()[0].(*vcluster.Target)
		nw, err := cl.FaultNetwork()
		if err != nil {
			t.Fatal(err)
		}
		if err := nw.Partition(src.Name(), src.Ports()...); err != nil {
			t.Fatal(err)
		}
		if cut := src.Report().Cut; cut != "partition" {
			t.Errorf("the report during the partition says cut %q", cut)
		}
		hangs(t, cl, src.P2PAddr(), "a connect into the partition")
		if err := nw.Heal(src.Name()); err != nil {
			t.Fatal(err)
		}
		if cut := src.Report().Cut; cut != "" {
			t.Errorf("the report after the heal says cut %q", cut)
		}
		connects(t, cl, src.P2PAddr(), "a connect after the heal")
	})
}

// hangs fails unless a connect to addr through the cluster's network
// hangs a whole second (its SYN dropped).
func hangs(t *testing.T, cl *vcluster.Cluster, addr, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err := cl.Network().DialContext(ctx, "tcp", addr)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
		t.Errorf("%s (%s): %v after %v, want it hanging the whole second", what, addr, err, time.Since(start))
	}
}

// connects fails unless a connect to addr through the cluster's network
// completes.
func connects(t *testing.T, cl *vcluster.Cluster, addr, what string) {
	t.Helper()
	c, err := cl.Network().DialContext(context.Background(), "tcp", addr)
	if err != nil {
		t.Errorf("%s (%s): %v", what, addr, err)
		return
	}
	c.Close()
}

// TestFaultNetworkCutsOneRanksPortOnly: a partition of source-0/rank1
// drops its own P2P port alone, as the firewall's rule does on a launched
// engine: a connect to it hangs while rank 0's P2P port and the engine's
// HTTP port answer, the rank's report holds the cut and the engine's does
// not; the heal lets it connect again. The source's own ports are every
// rank's.
func TestFaultNetworkCutsOneRanksPortOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := openConfig(t, runner.Config{SourceDP: 2}, nil)
		src := cl.Sources()[0].(*vcluster.Target)
		if got, want := src.Ports(), []int{8100, src.P2PPort(), src.P2PPort() + 1}; !slices.Equal(got, want) {
			t.Errorf("the source's ports %v, want %v (HTTP and every rank's P2P port)", got, want)
		}
		ft, err := src.RankTarget(1)
		if err != nil {
			t.Fatal(err)
		}
		rank := ft.(fault.NetTarget)
		if got := rank.Ports(); !slices.Equal(got, []int{src.P2PPort() + 1}) {
			t.Errorf("rank 1's ports %v, want its P2P port %d alone", got, src.P2PPort()+1)
		}
		nw, err := cl.FaultNetwork()
		if err != nil {
			t.Fatal(err)
		}
		if err := nw.Partition(fault.CutName(rank), rank.Ports()...); err != nil {
			t.Fatal(err)
		}
		if cut := rank.(fault.Reporter).Report().Cut; cut != "partition" {
			t.Errorf("rank 1's report during the partition says cut %q", cut)
		}
		if cut := src.Report().Cut; cut != "" {
			t.Errorf("the engine's report during rank 1's partition says cut %q, want none (the engine is not cut whole)", cut)
		}
		hangs(t, cl, rank.P2PAddr(), "a connect to rank 1's cut port")
		for _, addr := range []string{src.P2PAddr(), net.JoinHostPort(runner.Host, "8100")} {
			connects(t, cl, addr, "a connect to a port not cut")
		}
		if err := nw.Heal(fault.CutName(rank)); err != nil {
			t.Fatal(err)
		}
		if cut := rank.(fault.Reporter).Report().Cut; cut != "" {
			t.Errorf("rank 1's report after the heal says cut %q", cut)
		}
		connects(t, cl, rank.P2PAddr(), "a connect to rank 1 after the heal")
	})
}

// TestARanksStallFreezesItsCoreAlone: on a source of two data-parallel
// ranks, a stall of rank 1 freezes that core's process alone (the
// source's state stopped, as the runner reads any member stopped; its
// report's part frozen, the front end and rank 0 not) and its continue
// thaws it; a stall of the whole source still freezes every process, and
// a rank's continue thaws only its own.
func TestARanksStallFreezesItsCoreAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := vcluster.Opener{Seed: 1, Config: runner.Config{SourceDP: 2, ExtraArgs: []string{"--sim-startup-delay=0s"}}}
		c, err := o.Open(context.Background(), experiment.OpenEnv{OutDir: t.TempDir(), TimeScale: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		src := c.Sources()[0].(*vcluster.Target)
		rk, err := src.RankTarget(1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.RankTarget(2); err == nil {
			t.Error("RankTarget(2) of a source of 2 ranks: want an error")
		}
		frozen := func(r fault.Report) map[string]bool {
			m := map[string]bool{}
			for _, p := range r.Procs {
				m[p.Name] = p.Frozen
			}
			return m
		}
		ctx := context.Background()
		if _, err := rk.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		r := rk.(fault.Reporter).Report()
		if got := frozen(r); !r.Frozen || r.Part != "rank 1's core" || len(got) != 3 || !got["rank 1's core"] || got["rank 0's core"] || got["front end"] {
			t.Errorf("report of rank 1 stalled %+v: want rank 1's core frozen alone", r)
		}
		if src.Report().Frozen {
			t.Error("the whole source reports frozen while one rank is")
		}
		if st := src.State(); st.State != event.StateStopped {
			t.Errorf("source state with one rank stopped: %s, want stopped", st.State)
		}
		if err := rk.Continue(ctx); err != nil {
			t.Fatal(err)
		}
		if r := rk.(fault.Reporter).Report(); r.Frozen || src.State().State != event.StateReady {
			t.Errorf("after the rank's continue: %+v, state %s; want it running, ready", r, src.State().State)
		}
		if _, err := src.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		for name, f := range frozen(src.Report()) {
			if !f {
				t.Errorf("whole source stalled: %s not frozen", name)
			}
		}
		if err := rk.Continue(ctx); err != nil {
			t.Fatal(err)
		}
		if got := frozen(src.Report()); got["rank 1's core"] || !got["rank 0's core"] || !got["front end"] {
			t.Errorf("a rank's continue during the source's stall thawed %v, want rank 1's core only", got)
		}
		if err := src.Continue(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
