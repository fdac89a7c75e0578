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
	needPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Opener{Config: testConfig(sel)}.OpenCluster(ctx, t.TempDir())
	if err != nil {
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
	for _, tl := range []string{"at 1s loss 30% source-0 for 1s", "at 1s remove source-0"} {
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
	if c.decoder.Pod() != "dec" {
		t.Errorf("decoder pod %s, want dec", c.decoder.Pod())
	}
	deadline := time.Now().Add(10 * time.Second)
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
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
	self, _ := os.Executable()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), cutterEnv+"="+plane.kubeconfig)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "cut" {
		t.Fatalf("cutter said %q, want cut", line)
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
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

// cutter partitions source-0 and stalls source-1 of the cluster, says
// "cut" and waits to be killed.
func cutter(kubeconfig string) int {
	plane.kubeconfig, plane.ns = kubeconfig, "default"
	c, err := Opener{Config: testConfig("llm-d.ai/role=prefill")}.OpenCluster(context.Background(), "")
	if err == nil {
		nw, _ := c.FaultNetwork()
		err = nw.Partition("source-0")
	}
	if err == nil {
		_, err = c.sources[1].Stop(context.Background())
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
	got, err := cfg.Access(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range got {
		if want := a.Subresource != "exec"; a.Allowed != want {
			t.Errorf("%s: allowed %v, want %v", a.What(), a.Allowed, want)
		}
	}
}
