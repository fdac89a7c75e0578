package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"p2pfault/fault"
)

// A loss, a latency or a bandwidth on --kube is a Chaos Mesh NetworkChaos
// (action loss, delay, bandwidth) on the source's pod, where the cluster
// serves Chaos Mesh's CRD: a NetworkPolicy drops all or nothing, and
// p2pfault's links cannot run in the cluster. Chaos Mesh's daemon on the
// pod's node puts the netem or tbf qdisc on the pod's interface; p2pfault
// sees the object, not the daemon's work (VerifyCut says which it saw).

// chaosGroupVersion and networkChaos are Chaos Mesh's API, reached by
// the dynamic client.
const chaosGroupVersion = "chaos-mesh.org/v1alpha1"

var networkChaos = schema.GroupVersionResource{Group: "chaos-mesh.org", Version: "v1alpha1", Resource: "networkchaos"}

var _ fault.Shaper = (*Target)(nil)

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

// chaosObject is the run's NetworkChaos of pod ns/pod: the action on the
// packets the pod sends (direction to with no target: Chaos Mesh takes no
// other direction for these actions without one), the pod selected by
// name (its labels may be its siblings' too), labelled as everything the
// run creates; params is the action's own key (loss, delay, bandwidth).
func chaosObject(ns, name, run, pod, action string, params any) *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range ownLabels(run) {
		labels[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": chaosGroupVersion, "kind": "NetworkChaos",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
		"spec": map[string]any{
			"action": action, "mode": "all", "direction": "to",
			"selector": map[string]any{"pods": map[string]any{ns: []any{pod}}},
			action:     params,
		},
	}}
}

// makeChaos makes the target's NetworkChaos: recorded, then created, then
// held as its cut (what: as fault.Report's Cut says it).
func (c *Cluster) makeChaos(target, action string, params any, what string) error {
	t, err := c.byName(target)
	if err != nil {
		return err
	}
	ns, name := c.cfg.Namespace, c.policyName(target)
	if err := c.book.add(Record{Kind: "NetworkChaos", Namespace: ns, Name: name}); err != nil {
		return err
	}
	obj := chaosObject(ns, name, c.cfg.Run, t.where().pod, action, params)
	if _, err := c.cs.dyn.Resource(networkChaos).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		return fault.NotTaken(fmt.Errorf("create NetworkChaos %s: %w", name, err))
	}
	c.cuts.put(target, cut{pod: t.where().pod, chaos: name, what: what})
	return nil
}

// Loss is a NetworkChaos of action loss: pct% of the packets.
func (n network) Loss(target string, pct int, _ ...int) error {
	return n.c.makeChaos(target, "loss", map[string]any{"loss": strconv.Itoa(pct), "correlation": "0"}, fmt.Sprintf("loss %d%%", pct))
}

// Bandwidth's bucket, which Chaos Mesh requires and netem's tbf takes:
// the queue's bytes and the burst's (Chaos Mesh's own example's values).
const (
	bandwidthLimit  = 20971520
	bandwidthBuffer = 10000
)

// Shape (fault.Shaper) is a NetworkChaos of action bandwidth (a rate) or
// delay (a latency and its jitter) on the packets the pod sends.
func (t *Target) Shape(sh fault.Shaping) error {
	if sh.Bandwidth > 0 {
		rate := max(int64(math.Round(sh.Bandwidth)), 1)
		return t.c.makeChaos(t.name, "bandwidth", map[string]any{"rate": fmt.Sprintf("%dbps", rate), "limit": int64(bandwidthLimit), "buffer": int64(bandwidthBuffer)},
			fmt.Sprintf("bandwidth %dB/s", rate))
	}
	what := "latency " + sh.Latency.String()
	if sh.Jitter > 0 {
		what += "±" + sh.Jitter.String()
	}
	return t.c.makeChaos(t.name, "delay", map[string]any{"latency": sh.Latency.String(), "jitter": sh.Jitter.String(), "correlation": "0"}, what)
}

// Unshape deletes the target's NetworkChaos.
func (t *Target) Unshape() error { return network{t.c}.Heal(t.name) }

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

// VerifyCut reads the target's NetworkChaos back from the API server
// (fault.CutVerifier): verified when it exists as made, seen then (the
// Effect's After). Whether Chaos Mesh acted on it is its status, read
// until it says so, the object is gone (healed) or injectedWithin ends:
// said, not judged, since p2pfault cannot see the netem qdisc on the
// pod's node (on the kwok tests' cluster no Chaos Mesh runs at all); the
// fault's effect shows in the pulls.
func (t *Target) VerifyCut(ctx context.Context) fault.Effect {
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
	ef := fault.Effect{OK: true, After: time.Since(start), Detail: fmt.Sprintf("NetworkChaos %s/%s in force (%s)", ns, cu.chaos, describeChaos(obj, cu.pod))}
	ctx, cancel := context.WithTimeout(ctx, injectedWithin)
	defer cancel()
	for !injected(obj) {
		select {
		case <-ctx.Done():
			ef.Detail += fmt.Sprintf("; Chaos Mesh said nothing of its injection within %s (p2pfault cannot see its daemon act: the fault shows only in the pulls)", injectedWithin)
			return ef
		case <-time.After(pollEvery):
		}
		if obj, err = res.Get(ctx, cu.chaos, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			ef.Detail += "; healed before Chaos Mesh said it injected it (p2pfault cannot see its daemon act: the fault shows only in the pulls)"
			return ef
		} else if err != nil {
			obj = &unstructured.Unstructured{Object: map[string]any{}} // asked again on the next round
		}
	}
	ef.Detail += "; Chaos Mesh says it injected it on every pod selected (AllInjected)"
	return ef
}

// describeChaos says what a NetworkChaos of the run does, from its spec
// as read back.
func describeChaos(obj *unstructured.Unstructured, pod string) string {
	get := func(path ...string) string {
		v, _, _ := unstructured.NestedFieldNoCopy(obj.Object, append([]string{"spec"}, path...)...)
		return fmt.Sprint(v)
	}
	switch action := get("action"); action {
	case "loss":
		return fmt.Sprintf("action loss, %s%% of the packets pod %s sends", get("loss", "loss"), pod)
	case "delay":
		return fmt.Sprintf("action delay, every packet pod %s sends %s±%s late", pod, get("delay", "latency"), get("delay", "jitter"))
	case "bandwidth":
		return fmt.Sprintf("action bandwidth, the packets pod %s sends at %s", pod, get("bandwidth", "rate"))
	default:
		return "action " + action
	}
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
