package kube_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"p2pfault/cli"
	"p2pfault/kube"
)

// admin is the control plane's clientset, or the test skips without one.
func admin(t *testing.T) (*kubernetes.Clientset, string, string) {
	t.Helper()
	kc, ns, skip := kube.Plane()
	if skip != "" {
		t.Skip(skip)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs, kc, ns
}

// p2pfault runs the command in this process: its exit code and output.
func p2pfault(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := cli.Main(args, strings.NewReader(""), &out, &out)
	t.Logf("p2pfault %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
	return code, out.String()
}

// attachFile writes an attach file whose kubernetes: block is body.
func attachFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kube.yaml")
	if err := os.WriteFile(p, []byte("model: meta-llama/Llama-3.2-1B-Instruct\nkubernetes:\n"+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantIn(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
}

// TestDoctorAndCleanupReadTheAttachFilesKubernetesBlock: `doctor --attach
// FILE` is `doctor --kube` with the block's settings (its fixes name the
// block's keys), `cleanup --attach FILE` is `cleanup --kube` of the
// block's namespace (another namespace's leftovers stay), and a bad block
// is exit 2 naming the key.
func TestDoctorAndCleanupReadTheAttachFilesKubernetesBlock(t *testing.T) {
	cs, kc, ns := admin(t)
	good := attachFile(t, "  kubeconfig: "+kc+"\n  namespace: "+ns+"\n  sources: llm-d.ai/role=prefill\n  decoder: llm-d.ai/role=decode\n")
	code, out := p2pfault(t, "doctor", "--attach", good)
	if code != 0 {
		t.Errorf("doctor --attach: exit %d, want 0", code)
	}
	wantIn(t, out, "✓ kube pods: sources \"llm-d.ai/role=prefill\" and decoder \"llm-d.ai/role=decode\" found in namespace "+ns,
		"✓ kube access: create pods/exec in "+ns, "kube NetworkPolicy: ")

	elsewhere := attachFile(t, "  kubeconfig: "+kc+"\n  namespace: nowhere\n  sources: llm-d.ai/role=prefill\n  decoder: llm-d.ai/role=decode\n")
	code, out = p2pfault(t, "doctor", "--attach", elsewhere)
	if code != 1 {
		t.Errorf("doctor --attach (no pods there): exit %d, want 1", code)
	}
	wantIn(t, out, "✗ kube pods: ", "no pod in namespace nowhere matches", "check namespace, sources, decoder, http_port and p2p_port in the kubernetes: block of "+elsewhere)

	// What a p2pfault that is gone left: a labelled policy in the block's
	// namespace and one in another, and a cut mark on a pod.
	ctx := context.Background()
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, other, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, n := range []string{ns, "other"} {
		leftover(t, cs, n, "p2pfault-gone-source-0")
	}
	patch := []byte(`{"metadata":{"labels":{"` + kube.LabelCut + `":"p2pfault-gone-source-0"}}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(ctx, "src-a", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out = p2pfault(t, "cleanup", "--attach", good)
	if code != 0 {
		t.Errorf("cleanup --attach: exit %d, want 0", code)
	}
	wantIn(t, out, "cleanup --kube: deleted NetworkPolicy "+ns+"/p2pfault-gone-source-0 (run gone)",
		"cleanup --kube: removed label "+kube.LabelCut+" from pod "+ns+"/src-a", "cleanup --kube: 2 object(s) deleted or unlabelled")
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, "p2pfault-gone-source-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the block's namespace's policy after cleanup: %v, want not found", err)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies("other").Get(ctx, "p2pfault-gone-source-0", metav1.GetOptions{}); err != nil {
		t.Errorf("another namespace's policy after cleanup of the block's: %v, want it left", err)
	}
	if p, err := cs.CoreV1().Pods(ns).Get(ctx, "src-a", metav1.GetOptions{}); err != nil || p.Labels[kube.LabelCut] != "" {
		t.Errorf("src-a after cleanup: %v, labels %v", err, p.Labels)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"cleanup", "--attach", attachFile(t, "  namespace: x\n  sources: 'a in (b'\n  decoder: c=d\n")}, ":3: kubernetes.sources \"a in (b\": not a label selector"},
		{[]string{"doctor", "--attach", attachFile(t, "  namespace: x\n  sources: a=b\n  decoder: 'c!!d'\n")}, ":3: kubernetes.decoder \"c!!d\": not a label selector"},
		{[]string{"cleanup", "--attach", attachFile(t, "  namespace: x\n  sources: a=b\n")}, ":3: kubernetes.decoder: missing"},
		{[]string{"doctor", "--attach", attachFile(t, "  namespace: x\n  sources: a=b\n  decoder: c=d\n  sourcez: a\n")}, ":6: unknown field \"sourcez\""},
		{[]string{"cleanup", "--attach", good, "--kube-namespace", "x"}, "its kubernetes: block says which cluster and namespace to sweep, and --kube-namespace would say it again"},
		{[]string{"cleanup", "--attach", good, "--kube"}, "--kube would say it again"},
	} {
		if code, out := p2pfault(t, tt.args...); code != 2 || !strings.Contains(out, tt.want) {
			t.Errorf("p2pfault %s: exit %d, %q; want 2 naming %q", strings.Join(tt.args, " "), code, out, tt.want)
		}
	}
}

// leftover makes a policy labelled as a run's that is gone, deleted at
// the test's end if the code under test left it.
func leftover(t *testing.T, cs *kubernetes.Clientset, ns, name string) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{kube.LabelManagedBy: kube.ManagedBy, kube.LabelRun: "gone"}}}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(context.Background(), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.NetworkingV1().NetworkPolicies(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// TestDoctorTellsWhetherTheCNIEnforcesNetworkPolicy: doctor --kube looks
// for a known plugin's agent in kube-system: none is a warning (exit 0),
// kindnet's is named as enforcing nothing, cilium's (a pod its DaemonSet
// owns, Running) is a pass naming it.
func TestDoctorTellsWhetherTheCNIEnforcesNetworkPolicy(t *testing.T) {
	cs, kc, ns := admin(t)
	doctor := func() (int, string) {
		return p2pfault(t, "doctor", "--kube", "--kubeconfig", kc, "--kube-namespace", ns, "--kube-sources", "llm-d.ai/role=prefill",
			"--kube-decoder", "llm-d.ai/role=decode", "--model", "meta-llama/Llama-3.2-1B-Instruct")
	}
	code, out := doctor()
	if code != 0 {
		t.Errorf("doctor --kube with no CNI agent: exit %d, want 0 (a warning)", code)
	}
	wantIn(t, out, "⚠ kube NetworkPolicy: no policy-enforcing CNI found (looked for the agents of Cilium, Calico", "→ a partition is a NetworkPolicy",
		"if the connect completes the partition is reported as not taken effect")

	// A user who may not list kube-system's pods: doctor says it could not.
	noexec := strings.TrimSuffix(kc, "kubeconfig") + "kubeconfig-noexec"
	_, out = p2pfault(t, "doctor", "--kube", "--kubeconfig", noexec, "--kube-namespace", ns, "--kube-sources", "llm-d.ai/role=prefill",
		"--kube-decoder", "llm-d.ai/role=decode", "--model", "meta-llama/Llama-3.2-1B-Instruct")
	wantIn(t, out, "⚠ kube NetworkPolicy: no policy-enforcing CNI found", "; could not list pods in kube-system (forbidden), calico-system (forbidden)")

	agent(t, cs, "kindnet", "kindnet-x7k2p")
	_, out = doctor()
	wantIn(t, out, "⚠ kube NetworkPolicy: no policy-enforcing CNI found", "found kindnet (pod kube-system/kindnet-x7k2p), which enforces no NetworkPolicy")

	agent(t, cs, "cilium", "cilium-8fz2q")
	code, out = doctor()
	if code != 0 {
		t.Errorf("doctor --kube with cilium: exit %d, want 0", code)
	}
	wantIn(t, out, "✓ kube NetworkPolicy: enforced by cilium (its agent pod kube-system/cilium-8fz2q is Running)")
}

// agent makes pod name in kube-system as DaemonSet ds's (on the kwok
// node, so kwok has it Running), deleted at the test's end.
func agent(t *testing.T, cs *kubernetes.Clientset, ds, name string) {
	t.Helper()
	ctx := context.Background()
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{"k8s-app": ds},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds, UID: types.UID("5b0e4a64-0000-4000-8000-0000000000" + name[len(name)-2:]), Controller: &yes}}},
		Spec: corev1.PodSpec{NodeName: "kwok-node", HostNetwork: true, Containers: []corev1.Container{{Name: "agent", Image: ds}}},
	}
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.CoreV1().Pods("kube-system").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		p, err := cs.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod kube-system/%s not Running after a minute: %v", name, err)
		}
	}
}

// TestDoctorSaysWhetherTheClusterServesChaosMesh: without Chaos Mesh's
// CRD, doctor --kube says a loss would be refused (a pass: the run has
// none) or fails naming it (the run has one, exit 1); with it, a pass,
// and the NetworkChaos verbs are asked of the API server.
func TestDoctorSaysWhetherTheClusterServesChaosMesh(t *testing.T) {
	_, kc, ns := admin(t)
	doctor := func(extra ...string) (int, string) {
		return p2pfault(t, append([]string{"doctor", "--kube", "--kubeconfig", kc, "--kube-namespace", ns, "--kube-sources", "llm-d.ai/role=prefill",
			"--kube-decoder", "llm-d.ai/role=decode", "--model", "meta-llama/Llama-3.2-1B-Instruct"}, extra...)...)
	}
	code, out := doctor()
	if code != 0 {
		t.Errorf("doctor --kube, no loss, no Chaos Mesh: exit %d, want 0", code)
	}
	wantIn(t, out, "✓ kube Chaos Mesh: the cluster serves no networkchaos.chaos-mesh.org/v1alpha1 (Chaos Mesh is not installed): a loss, latency or bandwidth step would be refused (this run has none)")
	if strings.Contains(out, "networkchaos.chaos-mesh.org in") {
		t.Errorf("NetworkChaos verbs asked of a cluster that serves none")
	}
	loss := []string{"--timeline", "at 1s loss 30% source-0 for 1s; at 3s latency 50ms source-1 for 1s"}
	code, out = doctor(loss...)
	if code != 1 {
		t.Errorf("doctor --kube with a loss, no Chaos Mesh: exit %d, want 1", code)
	}
	wantIn(t, out, "✗ kube Chaos Mesh: the cluster serves no networkchaos.chaos-mesh.org/v1alpha1 (Chaos Mesh is not installed): refused for the run's loss, latency → install Chaos Mesh (chaos-mesh.org), or drop the run's loss, latency steps")
	kube.InstallChaosMesh(t)
	code, out = doctor(loss...)
	if code != 0 {
		t.Errorf("doctor --kube with a loss and Chaos Mesh: exit %d, want 0", code)
	}
	wantIn(t, out, "✓ kube Chaos Mesh: NetworkChaos served (chaos-mesh.org/v1alpha1): a loss, latency or bandwidth is a NetworkChaos on the source's pod",
		"✓ kube access: create networkchaos.chaos-mesh.org in "+ns+" (loss, latency, bandwidth by Chaos Mesh): allowed",
		"✓ kube access: delete networkchaos.chaos-mesh.org in "+ns+" (heal, unlink, cleanup --kube): allowed")
}
