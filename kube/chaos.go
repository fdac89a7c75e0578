package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"p2pfault/fault"
)

// A loss on --kube is a Chaos Mesh NetworkChaos (action loss) on the
// source's pod, where the cluster serves Chaos Mesh's CRD: a
// NetworkPolicy drops all or nothing. Chaos Mesh's daemon on the pod's
// node puts the netem qdisc on the pod's interface; p2pfault sees the
// object, not the daemon's work (VerifyLoss says which it saw).

// chaosGroupVersion and networkChaos are Chaos Mesh's API, reached by
// the dynamic client.
const chaosGroupVersion = "chaos-mesh.org/v1alpha1"

var networkChaos = schema.GroupVersionResource{Group: "chaos-mesh.org", Version: "v1alpha1", Resource: "networkchaos"}

// ErrNoChaosMesh: the cluster serves no NetworkChaos.
var ErrNoChaosMesh = errors.New("the cluster serves no networkchaos.chaos-mesh.org/v1alpha1 (Chaos Mesh is not installed)")

// ChaosMesh says whether the cluster serves Chaos Mesh's NetworkChaos:
// nil when it does, ErrNoChaosMesh when not, another error when the API
// server could not be asked.
func (c Config) ChaosMesh(ctx context.Context) error {
	cs, _, err := c.client()
	if err != nil {
		return err
	}
	return chaosMesh(ctx, cs)
}

// chaosMesh asks the API server's discovery (which every user may read)
// for the group's resources.
func chaosMesh(ctx context.Context, cs *clientset) error {
	raw, err := cs.core.RESTClient().Get().AbsPath("/apis/" + chaosGroupVersion).Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return ErrNoChaosMesh
	}
	if err != nil {
		return fmt.Errorf("ask the API server for %s: %w", chaosGroupVersion, err)
	}
	var l metav1.APIResourceList
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("the API server's %s: %w", chaosGroupVersion, err)
	}
	for _, r := range l.APIResources {
		if r.Name == networkChaos.Resource {
			return nil
		}
	}
	return ErrNoChaosMesh
}

// lossObject is the run's NetworkChaos of pod ns/pod: pct% of the packets
// the pod sends lost (direction to with no target: Chaos Mesh takes no
// other direction without one), the pod selected by name (its labels may
// be its siblings' too), labelled as everything the run creates.
func lossObject(ns, name, run, pod string, pct int) *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range ownLabels(run) {
		labels[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": chaosGroupVersion, "kind": "NetworkChaos",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
		"spec": map[string]any{
			"action": "loss", "mode": "all", "direction": "to",
			"selector": map[string]any{"pods": map[string]any{ns: []any{pod}}},
			"loss":     map[string]any{"loss": strconv.Itoa(pct), "correlation": "0"},
		},
	}}
}

// Loss makes the target's NetworkChaos: recorded, then created.
func (n network) Loss(target string, pct int, _ ...int) error {
	c := n.c
	t, err := c.byName(target)
	if err != nil {
		return err
	}
	ctx := context.Background()
	ns, name := c.cfg.Namespace, c.policyName(target)
	if err := c.book.add(Record{Kind: "NetworkChaos", Namespace: ns, Name: name}); err != nil {
		return err
	}
	obj := lossObject(ns, name, c.cfg.Run, t.where().pod, pct)
	if _, err := c.cs.dyn.Resource(networkChaos).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fault.NotTaken(fmt.Errorf("create NetworkChaos %s: %w", name, err))
	}
	c.cuts.put(target, cut{pod: t.where().pod, chaos: name, what: fmt.Sprintf("loss %d%%", pct)})
	return nil
}

// deleteChaos deletes NetworkChaos ns/name (gone already: nothing to do).
func deleteChaos(ctx context.Context, cs *clientset, ns, name string) error {
	err := cs.dyn.Resource(networkChaos).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete NetworkChaos %s/%s: %w", ns, name, err)
	}
	return nil
}

// injectedWithin bounds VerifyLoss's wait for Chaos Mesh to say it
// injected the fault (its AllInjected condition): half the bound of
// fault_took_effect, so a cluster where nothing says so is not late.
const injectedWithin = time.Second

// VerifyLoss reads the target's NetworkChaos back from the API server
// (fault.LossVerifier): verified when it exists as made, seen then (the
// Effect's After). Whether Chaos Mesh acted on it is its status, read
// until it says so, the object is gone (healed) or injectedWithin ends:
// said, not judged, since p2pfault cannot see the netem qdisc on the
// pod's node (on the kwok tests' cluster no Chaos Mesh runs at all); the
// loss's effect shows in the pulls.
func (t *Target) VerifyLoss(ctx context.Context) fault.Effect {
	start := time.Now()
	cu, ok := t.c.cuts.get(t.name)
	if !ok || cu.chaos == "" {
		return fault.Effect{Detail: "the run holds no NetworkChaos on " + t.name}
	}
	ns, res := t.c.cfg.Namespace, t.c.cs.dyn.Resource(networkChaos).Namespace(t.c.cfg.Namespace)
	obj, err := res.Get(ctx, cu.chaos, metav1.GetOptions{})
	if err != nil {
		return fault.Effect{After: time.Since(start), Detail: fmt.Sprintf("NetworkChaos %s/%s: %v", ns, cu.chaos, err)}
	}
	action, _, _ := unstructured.NestedString(obj.Object, "spec", "action")
	loss, _, _ := unstructured.NestedString(obj.Object, "spec", "loss", "loss")
	ef := fault.Effect{OK: true, After: time.Since(start), Detail: fmt.Sprintf("NetworkChaos %s/%s in force (action %s, %s%% of the packets pod %s sends)", ns, cu.chaos, action, loss, cu.pod)}
	ctx, cancel := context.WithTimeout(ctx, injectedWithin)
	defer cancel()
	for !injected(obj) {
		select {
		case <-ctx.Done():
			ef.Detail += fmt.Sprintf("; Chaos Mesh said nothing of its injection within %s (p2pfault cannot see its daemon act: the loss shows only in the pulls)", injectedWithin)
			return ef
		case <-time.After(pollEvery):
		}
		if obj, err = res.Get(ctx, cu.chaos, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			ef.Detail += "; healed before Chaos Mesh said it injected it (p2pfault cannot see its daemon act: the loss shows only in the pulls)"
			return ef
		} else if err != nil {
			obj = &unstructured.Unstructured{Object: map[string]any{}} // asked again on the next round
		}
	}
	ef.Detail += "; Chaos Mesh says it injected it on every pod selected (AllInjected)"
	return ef
}

// injected: Chaos Mesh's status says AllInjected.
func injected(obj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "AllInjected" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// sweepChaos deletes every NetworkChaos labelled managed-by=p2pfault in
// ns ("" all): none when the cluster serves no NetworkChaos.
func sweepChaos(ctx context.Context, cs *clientset, ns string, w io.Writer) (int, error) {
	if err := chaosMesh(ctx, cs); errors.Is(err, ErrNoChaosMesh) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	l, err := cs.dyn.Resource(networkChaos).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		return 0, fmt.Errorf("list NetworkChaos: %w", err)
	}
	n := 0
	for _, o := range l.Items {
		if err := deleteChaos(ctx, cs, o.GetNamespace(), o.GetName()); err != nil {
			return n, err
		}
		fmt.Fprintf(w, "cleanup --kube: deleted NetworkChaos %s/%s (run %s)\n", o.GetNamespace(), o.GetName(), o.GetLabels()[LabelRun])
		n++
	}
	return n, nil
}
