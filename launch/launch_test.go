package launch_test

import (
	"context"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/internal/enginetest"
	"p2pfault/launch"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

// TestMain lets the engines these tests launch be the test binary itself,
// as the fake engine (enginetest: a front end and one core per rank, in
// one session, started in milliseconds).
func TestMain(m *testing.M) {
	if os.Getenv(enginetest.EnvVar) == "1" {
		os.Exit(enginetest.Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// TestPlanIsTheRunnersPlan: the plan of a launched cluster counts the
// sources runner.Plan starts, each one's ranks only when one has several,
// and fills the model and the engine label the run reports; a
// configuration the runner refuses is refused before anything starts.
func TestPlanIsTheRunnersPlan(t *testing.T) {
	p, err := launch.Opener{Config: runner.Config{Sources: 3, SelfBin: "/bin/p2pfault"}}.Plan(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := experiment.Plan{Sources: 3, Model: runner.DefaultModel, Engine: runner.EngineSim}
	if !samePlan(p, want) {
		t.Errorf("plan of 3 sources: %+v, want %+v", p, want)
	}
	p, err = launch.Opener{Config: runner.Config{Sources: 2, SourceDP: 2, Model: "m", SelfBin: "/bin/p2pfault"}}.Plan(nil)
	if err != nil {
		t.Fatal(err)
	}
	want = experiment.Plan{Sources: 2, Ranks: []int{2, 2}, Model: "m", Engine: runner.EngineSim}
	if !samePlan(p, want) {
		t.Errorf("plan of 2 sources of 2 ranks: %+v, want %+v", p, want)
	}
	_, err = launch.Opener{Config: runner.Config{Engine: "tgi"}}.Plan(nil)
	if err == nil || exitcode.Code(err) != exitcode.Usage {
		t.Errorf("plan of engine tgi: %v (exit %d), want a usage error", err, exitcode.Code(err))
	}
}

func samePlan(a, b experiment.Plan) bool {
	return a.Sources == b.Sources && slices.Equal(a.Ranks, b.Ranks) && a.Model == b.Model && a.Engine == b.Engine && a.OwnNetwork == b.OwnNetwork
}

// TestALaunchedClusterIsItsProcesses opens a launched cluster of one
// source of two data-parallel ranks and a decoder (fake engines) and
// checks what the experiment and the fault kinds are given: the targets
// by role and index, each one's session, pids and addresses on this host
// (fault.Inspectable: what the kinds verify through), the ports the
// network kinds drop, each rank as a target of its own core alone, and
// Stop ending every engine's session.
func TestALaunchedClusterIsItsProcesses(t *testing.T) {
	var mu sync.Mutex
	sids := map[int]bool{}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for sid := range sids { // in case Stop did not end them
			_, _ = session.Signal(sid, unix.SIGKILL)
		}
	})
	o := launch.Opener{Config: runner.Config{
		Sources: 1, SourceDP: 2, FreePorts: true,
		Env:          []string{enginetest.EnvVar + "=1", "GORACE=atexit_sleep_ms=0"},
		ReadyTimeout: 30 * time.Second, StopGrace: 3 * time.Second,
	}}
	cl, err := o.Open(context.Background(), experiment.OpenEnv{
		OutDir: t.TempDir(), TimeScale: 1,
		OnChange: func(in event.EngineInfo) {
			mu.Lock()
			defer mu.Unlock()
			if in.Sid > 0 {
				sids[in.Sid] = true
			}
		},
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cl.Stop(context.Background())
		}
	})
	if _, ok := cl.(experiment.FirewallRecorder); !ok {
		t.Error("a launched cluster records no firewall table: it would get no network faults")
	}
	srcs, dec := cl.Sources(), cl.Decoder()
	if len(srcs) != 1 || srcs[0].Role() != event.RoleSource || srcs[0].Index() != 0 || dec.Role() != event.RoleDecoder {
		t.Fatalf("sources %d (%v), decoder %v: want one source-0 and the decoder", len(srcs), srcs, dec.Role())
	}
	src := srcs[0]
	h := checkHost(t, src, 3) // its front end and a core per rank
	if got, want := inspectable(t, src).Ports(), []int{portOf(t, src.HTTPURL()), src.P2PPort(), src.P2PPort() + 1}; !slices.Equal(got, want) {
		t.Errorf("source-0's ports %v, want its HTTP port and both ranks' P2P ports %v", got, want)
	}
	checkRanks(t, src, h)
	dh := checkHost(t, dec, 2)
	if err := cl.Stop(context.Background()); err != nil {
		t.Errorf("stop: %v", err)
	}
	stopped = true
	for _, sid := range []int{h.Sid, dh.Sid} {
		if live, _ := session.Live(sid); len(live) > 0 {
			t.Errorf("session %d after Stop: %v still live", sid, live)
		}
	}
}

type inspectableTarget interface {
	fault.Inspectable
	Ports() []int
}

func inspectable(t *testing.T, tg fault.Target) inspectableTarget {
	t.Helper()
	in, ok := tg.(inspectableTarget)
	if !ok {
		t.Fatalf("%s (%T) is not fault.Inspectable with ports: the kinds could neither verify nor cut it", tg.Name(), tg)
	}
	return in
}

func portOf(t *testing.T, url string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(url[len("http://"):])
	if err != nil {
		t.Fatalf("URL %q: %v", url, err)
	}
	n, _ := strconv.Atoi(port)
	return n
}

// checkHost checks what /proc and the ports show of tg: a session of
// procs live processes, the pids its host names (once the runner has seen
// every core start), listening at its HTTP and P2P addresses, ready.
func checkHost(t *testing.T, tg experiment.Target, procs int) fault.Host {
	t.Helper()
	var h fault.Host
	var live []int
	sees := func() bool {
		h, _ = inspectable(t, tg).Host()
		live, _ = session.Live(h.Sid)
		return h.Sid > 0 && len(live) == procs && slices.Equal(slices.Sorted(slices.Values(live)), slices.Sorted(slices.Values(h.Pids)))
	}
	if !enginetest.Eventually(10*time.Second, sees) {
		t.Fatalf("%s's host: %+v; session's live pids %v: want its session of %d, every pid named", tg.Name(), h, live, procs)
	}
	wantAddrs := []string{tg.HTTPURL()[len("http://"):], net.JoinHostPort(tg.P2PHost(), strconv.Itoa(tg.P2PPort()))}
	if !slices.Equal(h.Addrs, wantAddrs) {
		t.Errorf("%s's addresses %v, want %v", tg.Name(), h.Addrs, wantAddrs)
	}
	if h.Ready == nil || h.Ready(context.Background()) != nil {
		t.Errorf("%s's readiness check: not ready", tg.Name())
	}
	return h
}

// checkRanks checks src's ranks: two, each a target of its own core
// (Host's Part: one pid of the engine's session, a different one per
// rank) at its own P2P port; a third is refused.
func checkRanks(t *testing.T, src experiment.Target, h fault.Host) {
	t.Helper()
	rk, ok := src.(experiment.Ranked)
	if !ok || rk.Ranks() != 2 {
		t.Fatalf("source-0 (%T) is not Ranked with 2 ranks", src)
	}
	if _, err := rk.RankTarget(2); err == nil {
		t.Error("RankTarget(2) of a source of 2 ranks: no error")
	}
	var cores []int
	for r := range 2 {
		rt, err := rk.RankTarget(r)
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		in := inspectable(t, rt)
		var rh fault.Host
		if !enginetest.Eventually(10*time.Second, func() bool { rh, ok = in.Host(); return ok }) {
			t.Fatalf("%s: no core found in session %d", rt.Name(), h.Sid)
		}
		if len(rh.Part) != 1 || rh.Sid != h.Sid || !slices.Contains(h.Pids, rh.Part[0]) {
			t.Errorf("%s's host: part %v of session %d, want one core of source-0's session %d %v", rt.Name(), rh.Part, rh.Sid, h.Sid, h.Pids)
		}
		if got := in.Ports(); !slices.Equal(got, []int{src.P2PPort() + r}) {
			t.Errorf("%s's ports %v, want its P2P port %d alone", rt.Name(), got, src.P2PPort()+r)
		}
		cores = append(cores, rh.Part...)
	}
	if len(cores) == 2 && cores[0] == cores[1] {
		t.Errorf("both ranks are core %d", cores[0])
	}
}
