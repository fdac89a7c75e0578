package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"p2pfault/event"
	"p2pfault/fault"
)

func testConfig(sources string) Config {
	return Config{Kubeconfig: plane.kubeconfig, Namespace: plane.ns, Sources: sources, Decoder: "llm-d.ai/role=decode", Run: "test-run", Model: "meta-llama/Llama-3.2-1B-Instruct"}
}

// openTest opens the cluster of sel's sources for one test, stopped at
// its end.
func openTest(t *testing.T, sel string) *Cluster {
	t.Helper()
	return openConfig(t, testConfig(sel))
}

// openConfig opens the cluster cfg describes for one test, stopped at its
// end.
func openConfig(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	needPlane(t)
	resumeOnHost(t)
	enginesUp(t)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Opener{Config: cfg}.OpenCluster(ctx, t.TempDir())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
		cancel()
	})
	return c
}

// enginesUp waits until every pod's engine answers: one a test before
// left restarting (a kill that failed) is awaited here, so that test's
// failure is not this one's.
func enginesUp(t *testing.T) {
	t.Helper()
	for pod, e := range plane.engines {
		if err := waitHealthy(e.url(), 60*time.Second); err != nil {
			t.Fatalf("the engine of pod %s before the test: %v", pod, err)
		}
	}
}

// resumeOnHost is every test's last word: it continues every stopped
// process of every pod's engine, read from this host's /proc apart from
// the code under test, and fails the test if there was one (a stall the
// run should have undone). It runs however the test ended, so a failed
// test leaves no engine stopped for the next (t.Cleanup).
func resumeOnHost(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		for pod := range plane.engines {
			ps := onHost(t, pod)
			st, _ := ps.stopped()
			if ps.init.state == "T" {
				st = append(st, ps.init)
			}
			for _, p := range st {
				if err := syscall.Kill(p.pid, syscall.SIGCONT); err == nil {
					t.Errorf("pod %s: %v was left stopped (resumed by the test's cleanup)", pod, p)
				}
			}
		}
	})
}

// onHost is the pod's engine tree as this host's /proc shows it (the
// kwok node's exec runs here), read apart from the code under test.
func onHost(t *testing.T, pod string) procs {
	t.Helper()
	cmd := exec.Command("sh", "-c", listScript)
	cmd.Env = append(os.Environ(), InitEnv+"="+strconv.Itoa(plane.engines[pod].init))
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := parseProcs(string(out))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestPlanRefusesWhatAPodCannotTake(t *testing.T) {
	for _, tl := range []string{"at 1s mute source-0 for 1s", "at 1s remove source-0",
		"at 1s partition source-0 from decoder-1 for 1s", "at 1s latency 50ms source-0 from decoder-0 for 1s"} {
		parsed, err := fault.Parse(tl)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Opener{Config: Config{Model: "m", Namespace: "x", Sources: "a=b", Decoder: "c=d"}}.Plan(parsed)
		if err == nil || !strings.Contains(err.Error(), "--kube") {
			t.Errorf("%s: want a refusal naming --kube, got %v", tl, err)
		}
	}
	_, err := Opener{Config: Config{Model: "m", Sources: "a=b", Decoder: "c=d"}}.Plan(nil)
	if err == nil || !strings.Contains(err.Error(), "--kube-namespace") {
		t.Errorf("no namespace: want --kube-namespace named, got %v", err)
	}
	_, err = Opener{Config: Config{Model: "m", Namespace: "x", Sources: "a==b=", Decoder: "c=d"}}.Plan(nil)
	if err == nil || !strings.Contains(err.Error(), "--kube-sources") {
		t.Errorf("bad selector: want --kube-sources named, got %v", err)
	}
}

func TestOpenFindsThePodsByLabelOldestFirst(t *testing.T) {
	c := openTest(t, "llm-d.ai/role=prefill")
	want := []string{"src-a", "src-b"}
	if len(c.sources) != len(want) {
		t.Fatalf("%d sources, want %v", len(c.sources), want)
	}
	for i, s := range c.sources {
		e := plane.engines[want[i]]
		if s.Pod() != want[i] || s.Name() != event.SourceName(i) || s.HTTPURL() != e.url() || s.P2PPort() != e.p2p {
			t.Errorf("source %d: pod %s %s %s p2p %d, want pod %s %s p2p %d", i, s.Pod(), s.Name(), s.HTTPURL(), s.P2PPort(), want[i], e.url(), e.p2p)
		}
	}
	if d := c.Decoders(); len(d) != 1 || d[0].Name() != "decoder" || c.decoders[0].Pod() != "dec" {
		t.Errorf("decoders %v (first on pod %s), want one, \"decoder\" on pod dec", d, c.decoders[0].Pod())
	}
	deadline := time.Now().Add(time.Minute)
	for c.sources[0].State().State != event.StateReady {
		if time.Now().After(deadline) {
			t.Fatalf("source-0 state %+v, want ready", c.sources[0].State())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if h := c.sources[0].State().Health; !strings.Contains(h, "pod src-a on kwok-node") {
		t.Errorf("state's health %q: want the pod and its node", h)
	}
}

// A --kube-decoder selector of several pods gives decoder-0..N-1 in the
// sources' order (oldest first, then by name: src-a was made before src-b,
// or in the same second, and sorts first), as --decoders N does; a pod that
// both selectors match is refused, naming it.
func TestSeveralDecodersAreDecoder0ToNOldestFirst(t *testing.T) {
	cfg := testConfig("llm-d.ai/role=replica")
	cfg.Decoder = "llm-d.ai/role=prefill"
	plan, err := Opener{Config: cfg}.Plan(nil)
	if err != nil || plan.Decoders != 2 {
		t.Fatalf("plan: %d decoders, %v; want 2", plan.Decoders, err)
	}
	c := openConfig(t, cfg)
	ds := c.Decoders()
	if len(ds) != 2 || c.Decoder() != ds[0] {
		t.Fatalf("decoders %v, want 2, Decoder first", ds)
	}
	for i, want := range []string{"src-a", "src-b"} {
		d := c.decoders[i]
		if d.Name() != event.DecoderName(i, 2) || d.Index() != i || d.Role() != event.RoleDecoder || d.Pod() != want || d.HTTPURL() != plane.engines[want].url() {
			t.Errorf("decoder %d: %s (index %d, %s) on pod %s at %s, want %s on pod %s", i, d.Name(), d.Index(), d.Role(), d.Pod(), d.HTTPURL(), event.DecoderName(i, 2), want)
		}
	}
	cfg.Sources, cfg.Decoder = "llm-d.ai/role=prefill", "llm-d.ai/role in (prefill,decode)"
	if _, err := (Opener{Config: cfg}).Plan(nil); err == nil || !strings.Contains(err.Error(), "pod src-a matches both") {
		t.Errorf("overlapping selectors: %v, want pod src-a named", err)
	}
}

func TestStallByExecStopsEveryProcessOfTheEngineAndResumeRunsThem(t *testing.T) {
	c := openTest(t, "llm-d.ai/role=prefill")
	s := c.sources[0]
	ctx := context.Background()
	if _, err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st, run := onHost(t, "src-a").stopped()
	if len(st) < 2 || len(run) != 0 {
		t.Errorf("after the stall, /proc shows stopped %v, running %v: want the front end and its core stopped", st, run)
	}
	if r := s.Report(); !r.Frozen || len(r.Procs) != len(st) {
		t.Errorf("report %+v: want frozen, naming %d processes", r, len(st))
	}
	if !podLabelled(t, "src-a", LabelStalled) {
		t.Errorf("stalled pod not labelled %s", LabelStalled)
	}
	if err := s.Continue(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := onHost(t, "src-a").stopped(); len(st) != 0 {
		t.Errorf("after the resume, still stopped: %v", st)
	}
	if podLabelled(t, "src-a", LabelStalled) {
		t.Errorf("resumed pod still labelled %s", LabelStalled)
	}
	if err := waitHealthy(s.HTTPURL(), 10*time.Second); err != nil {
		t.Error(err)
	}
}

func TestStallOfAnEngineThatIsItsContainersPID1IsRefusedNotPartial(t *testing.T) {
	c := openTest(t, "llm-d.ai/role=pid1")
	_, err := c.sources[0].Stop(context.Background())
	if err == nil || !errors.Is(err, fault.ErrNotTaken) || !strings.Contains(err.Error(), "PID 1") {
		t.Fatalf("stall of a PID 1 engine: %v, want refused (not taken), naming PID 1", err)
	}
	t.Log(err)
	ps := onHost(t, "pid1")
	if st, _ := ps.stopped(); len(st) != 0 || ps.init.state == "T" {
		t.Errorf("refused stall left stopped: %v (init %v)", st, ps.init)
	}
	if podLabelled(t, "pid1", LabelStalled) {
		t.Errorf("refused stall left the pod labelled")
	}
}

func TestKillKillsTheEngineAndItComesBackInPlace(t *testing.T) {
	c := openTest(t, "llm-d.ai/role=prefill")
	s := c.sources[1]
	before := onHost(t, "src-b").engine()
	var sent error = errors.New("never signalled")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := s.Kill(ctx, func(_ time.Time, err error) { sent = err }); err != nil {
		t.Fatal(err)
	}
	if sent != nil {
		t.Errorf("signalled with %v", sent)
	}
	after := onHost(t, "src-b").engine()
	if len(after) == 0 || after[0].pid == before[0].pid {
		t.Errorf("engine pids before %v, after %v: want new processes", before, after)
	}
	if s.HTTPURL() != plane.engines["src-b"].url() {
		t.Errorf("address changed: %s", s.HTTPURL())
	}
}

func TestPartitionIsALabelledNetworkPolicyDeletedAtStop(t *testing.T) {
	c := openTest(t, "llm-d.ai/role=prefill")
	nw, _ := c.FaultNetwork()
	if err := nw.Partition("source-0"); err != nil {
		t.Fatal(err)
	}
	if n := labelledPolicies(t); n != 1 {
		t.Fatalf("%d labelled NetworkPolicies after the partition, want 1", n)
	}
	if !podLabelled(t, "src-a", LabelCut) {
		t.Errorf("cut pod not labelled %s", LabelCut)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := labelledPolicies(t); n != 0 || podLabelled(t, "src-a", LabelCut) {
		t.Errorf("after Stop: %d labelled NetworkPolicies, pod cut label %v; want none", n, podLabelled(t, "src-a", LabelCut))
	}
}

// TestSIGKILLMidPartitionThenSweepLeavesNoLabelledObject: a p2pfault
// (this binary as cutter) partitions and stalls, is SIGKILLed, and
// Sweep (cleanup --kube) with no run folder finds everything by label.
func TestSIGKILLMidPartitionThenSweepLeavesNoLabelledObject(t *testing.T) {
	needPlane(t)
	resumeOnHost(t)
	enginesUp(t)
	killCutter(t)
	if n := labelledPolicies(t); n != 1 || !podLabelled(t, "src-b", LabelStalled) {
		t.Fatalf("after the SIGKILL: %d labelled policies, stalled label %v: want the cutter's left behind", n, podLabelled(t, "src-b", LabelStalled))
	}
	var w bytes.Buffer
	n, err := Sweep(context.Background(), SweepConfig{Kubeconfig: plane.kubeconfig}, &w)
	t.Log(w.String())
	if err != nil || n != 3 {
		t.Errorf("Sweep: %d, %v; want 3 (the policy, the cut mark, the stall mark)", n, err)
	}
	if n := labelledPolicies(t); n != 0 || podLabelled(t, "src-a", LabelCut) || podLabelled(t, "src-b", LabelStalled) {
		t.Errorf("after the sweep: %d labelled policies, marks left", n)
	}
	if st, _ := onHost(t, "src-b").stopped(); len(st) != 0 {
		t.Errorf("after the sweep, src-b still stopped: %v", st)
	}
}

// killCutter runs this binary as a cutter (env added), waits until it
// says "cut" and SIGKILLs it.
func killCutter(t *testing.T, env ...string) {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), cutterEnv+"="+plane.kubeconfig), env...)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	said := make(chan string, 1)
	go func() { line, _ := bufio.NewReader(out).ReadString('\n'); said <- line }()
	select {
	case line := <-said:
		if strings.TrimSpace(line) != "cut" {
			t.Fatalf("cutter said %q, want cut", line)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the cutter said nothing in 2 minutes")
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

// cutter partitions source-0 and stalls source-1 of the cluster (with
// cutterLossEnv=1, also puts a loss on source-1: a NetworkChaos), says
// "cut" and waits to be killed.
func cutter(kubeconfig string) int {
	plane.kubeconfig, plane.ns = kubeconfig, "default"
	c, err := Opener{Config: testConfig("llm-d.ai/role=prefill")}.OpenCluster(context.Background(), "")
	if err == nil {
		nw, _ := c.FaultNetwork()
		err = nw.Partition("source-0")
		if err == nil && os.Getenv(cutterLossEnv) == "1" {
			err = nw.Loss("source-1", 30)
		}
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err = c.sources[1].Stop(ctx)
		cancel()
	}
	if err != nil {
		os.Stdout.WriteString("error: " + err.Error() + "\n")
		return 1
	}
	os.Stdout.WriteString("cut\n")
	select {}
}

func podLabelled(t *testing.T, pod, key string) bool {
	t.Helper()
	cs, err := testConfig("").clientset()
	if err != nil {
		t.Fatal(err)
	}
	p, err := cs.CoreV1().Pods(plane.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, ok := p.Labels[key]
	return ok
}

func labelledPolicies(t *testing.T) int {
	t.Helper()
	cs, err := testConfig("").clientset()
	if err != nil {
		t.Fatal(err)
	}
	l, err := cs.NetworkingV1().NetworkPolicies("").List(context.Background(), metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// TestAccessNamesTheVerbARoleLacks: a user whose Role grants everything
// but pods/exec is told exactly that (doctor --kube's lines).
func TestAccessNamesTheVerbARoleLacks(t *testing.T) {
	needPlane(t)
	grantAllBut(t, "noexec", "exec")
	cfg := testConfig("llm-d.ai/role=prefill")
	cfg.Kubeconfig = strings.TrimSuffix(plane.kubeconfig, "kubeconfig") + "kubeconfig-noexec"
	// The API server's authorizer learns of the new Role from its own
	// watch, a moment after the create returned: ask until the first
	// verb the Role grants is allowed (a minute at most), then judge all.
	var got []Access
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if got, err = cfg.Access(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got[0].Allowed || time.Now().After(deadline) {
			break
		}
	}
	for _, a := range got {
		if want := a.Subresource != "exec"; a.Allowed != want {
			t.Errorf("%s: allowed %v, want %v", a.What(), a.Allowed, want)
		}
	}
}

// TestSignalSkipsAProcessThatIsGoneOrIsAnotherNow: a kill whose list was
// read a moment before (a core that died with its front end, a pid
// handed to a new process) is not a failed kill, and a pid that names
// another process now is not signalled.
func TestSignalSkipsAProcessThatIsGoneOrIsAnotherNow(t *testing.T) {
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Process.Kill(); _ = live.Wait() })
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	ps := onHostTree(t, os.Getpid())
	var me proc
	for _, p := range ps.below {
		if p.pid == live.Process.Pid {
			me = p
		}
	}
	if me.pid == 0 {
		t.Fatalf("sleep (pid %d) not in this process's tree: %v", live.Process.Pid, ps.below)
	}
	other := me
	other.start = me.start + "0" // the same pid, another process
	dead := proc{pid: gone.Process.Pid, start: "1"}
	run := func(sig string, list ...proc) string {
		out, err := exec.Command("sh", append([]string{"-c", signalScript, "sh", sig}, ids(list)...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("SIG%s to %v: %v: %s", sig, list, err, out)
		}
		return string(out)
	}
	if out := run("STOP", dead, other); !strings.Contains(out, "gone "+strconv.Itoa(dead.pid)) || !strings.Contains(out, "gone "+strconv.Itoa(me.pid)) {
		t.Errorf("signal to a dead pid and to a pid with another start: %q, want both gone", out)
	}
	if st := stateOf(t, me.pid); st == "T" {
		t.Fatalf("a pid with another starttime was stopped")
	}
	run("STOP", dead, me)
	if st := stateOf(t, me.pid); st != "T" {
		t.Errorf("the live process's state after SIGSTOP: %s, want T", st)
	}
	run("CONT", me)
	if st := stateOf(t, me.pid); st == "T" {
		t.Errorf("the live process's state after SIGCONT: %s", st)
	}
}

// onHostTree is the tree below pid as listScript reads it on this host.
func onHostTree(t *testing.T, pid int) procs {
	t.Helper()
	cmd := exec.Command("sh", "-c", listScript)
	cmd.Env = append(os.Environ(), InitEnv+"="+strconv.Itoa(pid))
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	ps, err := parseProcs(string(out))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// stateOf is /proc's state of pid, once it has settled after a signal
// (a stop or continue takes effect when the process is next scheduled).
func stateOf(t *testing.T, pid int) string {
	t.Helper()
	var st string
	for i := 0; i < 100; i++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		st = strings.Fields(s[strings.LastIndex(s, ")")+1:])[0]
		if st != "R" {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	return st
}

// TestAStallWhileTheEngineRestartsIsWholeOrUndone: the race that hung CI.
// The engine's processes are killed from this host and at once stalled
// by exec, while its init is bringing a new engine up (a front end
// forking its core): whichever wins, the stall either stops every process
// of the pod's tree, or is undone and not taken; never a part stopped and
// a loop waiting on the rest. Then the engine runs again.
func TestAStallWhileTheEngineRestartsIsWholeOrUndone(t *testing.T) {
	c := openTest(t, "llm-d.ai/role=prefill")
	s := c.sources[1]
	// Each round stalls a little later into the restart: its init's pause,
	// the front end starting, the core forked.
	for round := 0; round < 6; round++ {
		for _, p := range onHost(t, "src-b").engine() {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(time.Duration(round) * 100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := s.Stop(ctx)
		cancel()
		st, run := onHost(t, "src-b").stopped()
		switch {
		case err == nil && len(run) > 0:
			t.Fatalf("round %d: stall taken with %v stopped and %v running", round, st, run)
		case err != nil && !errors.Is(err, fault.ErrNotTaken):
			t.Fatalf("round %d: stall: %v, want taken or not taken", round, err)
		case err != nil && len(st) > 0:
			t.Fatalf("round %d: stall not taken (%v) but %v left stopped", round, err, st)
		}
		t.Logf("round %d: stall %v; stopped %v", round, err, st)
		if err == nil {
			if err := s.Continue(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if err := waitHealthy(s.HTTPURL(), time.Minute); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}

// TestReplaceDeletesThePodAndMovesToItsControllersNewOne: replace deletes
// the source's pod and follows its controller's new pod (new name, new
// address), once its engine answers; a pod with no controller is refused.
func TestReplaceDeletesThePodAndMovesToItsControllersNewOne(t *testing.T) {
	c := openTest(t, "llm-d.ai/role=replica")
	s := c.sources[0]
	oldPod, oldURL, before := s.Pod(), s.HTTPURL(), s.Report()
	sent := errors.New("never signalled")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := s.Replace(ctx, func(_ time.Time, err error) { sent = err }); err != nil {
		t.Fatal(err)
	}
	if sent != nil {
		t.Errorf("signalled with %v", sent)
	}
	if s.Pod() == oldPod || s.HTTPURL() == oldURL || s.HTTPURL() != plane.engines[s.Pod()].url() {
		t.Errorf("after the replace: pod %s at %s (was %s at %s): want the other slot's pod at its engine's address %s", s.Pod(), s.HTTPURL(), oldPod, oldURL, plane.engines[s.Pod()].url())
	}
	cs, err := testConfig("").clientset()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods(plane.ns).Get(ctx, oldPod, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old pod %s: %v, want not found", oldPod, err)
	}
	if after := s.Report(); after.Instance <= before.Instance || !after.Running {
		t.Errorf("report after the replace: instance %d (before %d), running %v: want a new instance running", after.Instance, before.Instance, after.Running)
	}

	bare := openTest(t, "llm-d.ai/role=prefill").sources[0]
	if err := bare.CanReplace(); err == nil || !strings.Contains(err.Error(), "no controller") {
		t.Errorf("CanReplace of a pod with no controller: %v, want refused naming it", err)
	}
}

// TestPodEventsAreLinesOfTheirEnginesLog: an Event about a pod the run's
// engine is on comes as a line of that engine's log; one about another
// pod does not.
func TestPodEventsAreLinesOfTheirEnginesLog(t *testing.T) {
	needPlane(t)
	resumeOnHost(t)
	enginesUp(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := make(chan string, 16)
	c, err := Opener{Config: testConfig("llm-d.ai/role=prefill")}.open(ctx, t.TempDir(), func(engine, line string) { lines <- engine + " " + line })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	cs, err := testConfig("").clientset()
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{"pid1", "src-b"} { // pid1: no engine of this run
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: pod + "-", Namespace: plane.ns},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: plane.ns, Name: pod},
			Type:           corev1.EventTypeWarning, Reason: "BackOff", Message: "Back-off restarting failed container engine",
		}
		got, err := cs.CoreV1().Events(plane.ns).Create(ctx, ev, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().Events(plane.ns).Delete(context.Background(), got.Name, metav1.DeleteOptions{})
		})
	}
	want := "source-1 pod event src-b: Warning BackOff: Back-off restarting failed container engine"
	select {
	case line := <-lines:
		if line != want {
			t.Errorf("first line %q, want %q", line, want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no line in a minute, want %q", want)
	}
}
