package kube

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
)

// dyn is the control plane's dynamic client.
func dyn(t *testing.T) dynamic.Interface {
	t.Helper()
	_, rc, err := testConfig("").client()
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installChaosMesh installs a minimal NetworkChaos CRD (any spec kept: no
// Chaos Mesh runs on the kwok cluster, so nothing acts on the objects)
// and waits until the API server serves it; at the test's end it is
// deleted and its absence awaited, so the next test sees none.
func installChaosMesh(t *testing.T) {
	t.Helper()
	d, ctx := dyn(t), context.Background()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "networkchaos.chaos-mesh.org"},
		"spec": map[string]any{
			"group": "chaos-mesh.org", "scope": "Namespaced",
			"names": map[string]any{"plural": "networkchaos", "singular": "networkchaos", "kind": "NetworkChaos", "listKind": "NetworkChaosList"},
			"versions": []any{map[string]any{"name": "v1alpha1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	if _, err := d.Resource(crds).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Resource(crds).Delete(ctx, "networkchaos.chaos-mesh.org", metav1.DeleteOptions{})
		waitChaosMesh(t, false)
	})
	waitChaosMesh(t, true)
}

// waitChaosMesh waits (a minute at most) until the cluster serves
// NetworkChaos, or does not.
func waitChaosMesh(t *testing.T, served bool) {
	t.Helper()
	cfg := testConfig("")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := cfg.ChaosMesh(context.Background())
		if (err == nil) == served && (served || errors.Is(err, ErrNoChaosMesh)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("NetworkChaos served %v after a minute: %v", !served, err)
		}
	}
}

// labelledChaos are the NetworkChaos objects labelled as p2pfault's.
func labelledChaos(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	l, err := dyn(t).Resource(networkChaos).Namespace("").List(context.Background(), metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestLossIsALabelledNetworkChaosVerifiedAndDeleted: where the cluster
// serves no NetworkChaos a loss is refused before the run (exit 2, naming
// Chaos Mesh and the step); where it does, a loss is a NetworkChaos on the
// source's pod alone, labelled as the run's, read back by its
// verification (which says whether Chaos Mesh reported injecting it),
// deleted by heal and by the cluster's Stop.
func TestLossIsALabelledNetworkChaosVerifiedAndDeleted(t *testing.T) {
	needPlane(t)
	tl, err := fault.Parse("at 1s loss 30% source-0 for 2s")
	if err != nil {
		t.Fatal(err)
	}
	op := Opener{Config: testConfig("llm-d.ai/role=prefill")}
	_, err = op.Plan(tl)
	if exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "loss is a Chaos Mesh NetworkChaos on --kube") ||
		!strings.Contains(err.Error(), "Chaos Mesh is not installed") || !strings.Contains(err.Error(), `timeline step "at 1s loss 30% source-0 for 2s"`) {
		t.Fatalf("Plan of a loss without Chaos Mesh: %v (exit %d); want exit 2 naming Chaos Mesh and the step", err, exitcode.Code(err))
	}
	installChaosMesh(t)
	if _, err := op.Plan(tl); err != nil {
		t.Fatalf("Plan of a loss with Chaos Mesh: %v", err)
	}
	c := openTest(t, "llm-d.ai/role=prefill")
	nw, _ := c.FaultNetwork()
	if err := nw.Loss("source-0", 30); err != nil {
		t.Fatal(err)
	}
	got := labelledChaos(t)
	if len(got) != 1 {
		t.Fatalf("%d labelled NetworkChaos after the loss, want 1", len(got))
	}
	obj := got[0]
	for path, want := range map[string]string{"spec.action": "loss", "spec.mode": "all", "spec.direction": "to", "spec.loss.loss": "30",
		"metadata.labels." + LabelRun: "test-run"} {
		if v, _, _ := unstructured.NestedString(obj.Object, strings.SplitN(path, ".", 3)...); v != want {
			t.Errorf("NetworkChaos %s = %q, want %q", path, v, want)
		}
	}
	if pods, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "selector", "pods", plane.ns); len(pods) != 1 || pods[0] != "src-a" {
		t.Errorf("NetworkChaos selects pods %v, want [src-a] alone", pods)
	}
	src := c.sources[0]
	if cut := src.Report().Cut; cut != "loss 30%" {
		t.Errorf("Report().Cut = %q, want loss 30%%", cut)
	}
	ef := src.VerifyCut(context.Background())
	if !ef.OK || ef.After > time.Second || !strings.Contains(ef.Detail, "in force (action loss, 30% of the packets pod src-a sends)") ||
		!strings.Contains(ef.Detail, "Chaos Mesh said nothing of its injection within 1s") {
		t.Errorf("VerifyLoss with no Chaos Mesh acting: %+v", ef)
	}
	// What Chaos Mesh's controller writes once its daemon injected it.
	unstructured.SetNestedSlice(obj.Object, []any{map[string]any{"type": "AllInjected", "status": "True"}}, "status", "conditions")
	if _, err := dyn(t).Resource(networkChaos).Namespace(plane.ns).Update(context.Background(), &obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ef := src.VerifyCut(context.Background()); !ef.OK || !strings.HasSuffix(ef.Detail, "Chaos Mesh says it injected it on every pod selected (AllInjected)") {
		t.Errorf("VerifyLoss once Chaos Mesh said AllInjected: %+v", ef)
	}
	if err := nw.Heal("source-0"); err != nil {
		t.Fatal(err)
	}
	if n := len(labelledChaos(t)); n != 0 || src.Report().Cut != "" {
		t.Errorf("after heal: %d labelled NetworkChaos, cut %q; want none", n, src.Report().Cut)
	}
	if err := nw.Loss("source-1", 5); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(labelledChaos(t)); n != 0 {
		t.Errorf("after Stop: %d labelled NetworkChaos, want none", n)
	}
}

// TestSIGKILLMidLossThenSweepLeavesNoNetworkChaos: a p2pfault (this binary
// as cutter) that put a loss on (a NetworkChaos) is SIGKILLed, and Sweep
// (cleanup --kube) with no run folder deletes it with the rest.
func TestSIGKILLMidLossThenSweepLeavesNoNetworkChaos(t *testing.T) {
	needPlane(t)
	resumeOnHost(t)
	enginesUp(t)
	installChaosMesh(t)
	killCutter(t, cutterLossEnv+"=1")
	if n := len(labelledChaos(t)); n != 1 {
		t.Fatalf("after the SIGKILL: %d labelled NetworkChaos, want the cutter's one left behind", n)
	}
	var w bytes.Buffer
	n, err := Sweep(context.Background(), SweepConfig{Kubeconfig: plane.kubeconfig}, &w)
	t.Log(w.String())
	if err != nil || n != 4 || !strings.Contains(w.String(), "cleanup --kube: deleted NetworkChaos default/p2pfault-test-run-source-1 (run test-run)") {
		t.Errorf("Sweep: %d, %v; want 4 (the NetworkChaos, the policy, the cut mark, the stall mark), the NetworkChaos named", n, err)
	}
	if n := len(labelledChaos(t)); n != 0 || labelledPolicies(t) != 0 {
		t.Errorf("after the sweep: %d labelled NetworkChaos, %d policies; want none", n, labelledPolicies(t))
	}
}

// TestAChaosRunOnThePodsIsVerifiedFromItsNetworkChaos: a run whose
// timeline has a loss, a latency and a bandwidth on --kube takes each
// through the API server (the fault event, then heal or unlink after its
// for: latency and bandwidth with no link of the run's), verifies each
// from its object (no Chaos Mesh acts on kwok: the verification says so)
// and leaves no NetworkChaos behind.
func TestAChaosRunOnThePodsIsVerifiedFromItsNetworkChaos(t *testing.T) {
	needPlane(t)
	resumeOnHost(t)
	enginesUp(t)
	installChaosMesh(t)
	exp, err := experiment.New(experiment.Config{
		Timeline: "at 2s loss 30% source-0 for 3s; at 8s latency 50ms±10ms source-0 for 3s; at 14s bandwidth 1MB/s source-1 for 3s",
		Recovery: 4 * time.Second, TimeScale: podTimeScale, OutDir: t.TempDir(),
		Cluster: Opener{Config: testConfig("llm-d.ai/role=prefill")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var faults []string
	var verified []event.Verification
	evs := exp.Subscribe()
	go func() {
		for ev := range evs {
			mu.Lock()
			switch {
			case ev.Kind == event.KindVerification:
				verified = append(verified, *ev.Verification)
			case ev.Kind == event.KindWarning:
				t.Logf("warning: %s", ev.Message)
			case ev.Kind == event.KindFault:
				faults = append(faults, ev.Fault.Action+" "+ev.Fault.Err)
			}
			mu.Unlock()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := exp.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Each step waits for the one before on its source to end, so the
	// order of source-0's latency and source-1's bandwidth is the machine's.
	slices.Sort(faults)
	if strings.Join(faults, ",") != "bandwidth ,heal ,latency ,loss ,unlink ,unlink " {
		t.Errorf("fault events %q, want each fault and its end, none failed", faults)
	}
	want := map[string]string{
		fault.ActionLoss:      "NetworkChaos default/p2pfault-test-run-source-0 in force (action loss, 30% of the packets pod src-a sends)",
		fault.ActionLatency:   "NetworkChaos default/p2pfault-test-run-source-0 in force (action delay, every packet pod src-a sends 50ms±10ms late)",
		fault.ActionBandwidth: "NetworkChaos default/p2pfault-test-run-source-1 in force (action bandwidth, the packets pod src-b sends at 1000000bps)",
	}
	for _, v := range verified {
		t.Logf("verification: %s %v after %v: %s", v.Action, v.Verified, v.After, v.Detail)
		if w, ok := want[v.Action]; ok && v.Verified && strings.Contains(v.Detail, w) &&
			strings.Contains(v.Detail, "p2pfault cannot see its daemon act: the fault shows only in the pulls") && v.After < time.Second {
			delete(want, v.Action)
		}
	}
	if len(want) > 0 {
		t.Errorf("not verified from their NetworkChaos: %v", want)
	}
	if n := len(labelledChaos(t)); n != 0 {
		t.Errorf("after the run: %d labelled NetworkChaos, want none", n)
	}
}

// TestLatencyAndBandwidthAreNetworkChaosOfDelayAndBandwidth: the kinds
// that slow a link are, on --kube, a NetworkChaos on the source's pod
// (fault.Shaper): delay with its latency and jitter, bandwidth with its
// rate in bytes per second and the bucket Chaos Mesh requires; read back
// by the verification, deleted by unshape (unlink).
func TestLatencyAndBandwidthAreNetworkChaosOfDelayAndBandwidth(t *testing.T) {
	needPlane(t)
	installChaosMesh(t)
	c := openTest(t, "llm-d.ai/role=prefill")
	src := c.sources[1]
	for _, tt := range []struct {
		sh         fault.Shaping
		cut        string
		fields     map[string]any
		verifyText string
	}{
		{fault.Shaping{Latency: 50 * time.Millisecond, Jitter: 10 * time.Millisecond}, "latency 50ms±10ms",
			map[string]any{"action": "delay", "delay.latency": "50ms", "delay.jitter": "10ms", "delay.correlation": "0"},
			"in force (action delay, every packet pod src-b sends 50ms±10ms late)"},
		{fault.Shaping{Bandwidth: 1e6}, "bandwidth 1000000B/s",
			map[string]any{"action": "bandwidth", "bandwidth.rate": "1000000bps", "bandwidth.limit": int64(bandwidthLimit), "bandwidth.buffer": int64(bandwidthBuffer)},
			"in force (action bandwidth, the packets pod src-b sends at 1000000bps)"},
	} {
		if err := src.Shape(tt.sh); err != nil {
			t.Fatal(err)
		}
		got := labelledChaos(t)
		if len(got) != 1 {
			t.Fatalf("%s: %d labelled NetworkChaos, want 1", tt.cut, len(got))
		}
		for path, want := range tt.fields {
			if v, _, _ := unstructured.NestedFieldNoCopy(got[0].Object, append([]string{"spec"}, strings.Split(path, ".")...)...); v != want {
				t.Errorf("%s: spec.%s = %#v, want %#v", tt.cut, path, v, want)
			}
		}
		if pods, _, _ := unstructured.NestedStringSlice(got[0].Object, "spec", "selector", "pods", plane.ns); len(pods) != 1 || pods[0] != "src-b" {
			t.Errorf("%s: selects pods %v, want [src-b] alone", tt.cut, pods)
		}
		if cut := src.Report().Cut; cut != tt.cut {
			t.Errorf("Report().Cut = %q, want %q", cut, tt.cut)
		}
		if ef := src.VerifyCut(context.Background()); !ef.OK || !strings.Contains(ef.Detail, tt.verifyText) {
			t.Errorf("%s: VerifyCut %+v, want it naming %q", tt.cut, ef, tt.verifyText)
		}
		if err := src.Unshape(); err != nil {
			t.Fatal(err)
		}
		if n := len(labelledChaos(t)); n != 0 || src.Report().Cut != "" {
			t.Errorf("%s: after unshape %d labelled NetworkChaos, cut %q", tt.cut, n, src.Report().Cut)
		}
	}
}
