package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"p2pfault/fault"
)

// FaultNetwork is the cluster's own network faults: a partition is a
// NetworkPolicy that selects the engine's pod (marked with LabelCut) and
// allows nothing in or out, enforced by the cluster's CNI (only where it
// enforces NetworkPolicy: `doctor --kube` looks for a known one's agent,
// cni.go; the verification connects to see). A loss is a Chaos Mesh
// NetworkChaos (chaos.go), where the cluster serves it (Plan refuses a
// loss where it does not).
func (c *Cluster) FaultNetwork() (fault.Network, error) { return network{c}, nil }

type network struct{ c *Cluster }

// cuts are the network faults in force, by target name.
type cuts struct {
	mu sync.Mutex
	by map[string]cut
}

// cut is one: a NetworkPolicy (policy, and the pod's mark) or a
// NetworkChaos (chaos), and what it is as fault.Report's Cut says it
// ("partition", "loss 30%").
type cut struct{ pod, policy, chaos, what string }

// of is what the target's cut is ("" none).
func (cs *cuts) of(name string) string {
	cu, _ := cs.get(name)
	return cu.what
}

func (cs *cuts) get(name string) (cut, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cu, ok := cs.by[name]
	return cu, ok
}

func (cs *cuts) put(name string, cu cut) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.by == nil {
		cs.by = map[string]cut{}
	}
	cs.by[name] = cu
}

func (c *Cluster) byName(name string) (*Target, error) {
	for _, t := range c.Targets() {
		if fault.CutName(t) == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no engine %s", name)
}

// policyName is the run's policy for the target: DNS-1123, under 63.
func (c *Cluster) policyName(target string) string {
	run := strings.NewReplacer(".", "-", "_", "-").Replace(c.cfg.Run)
	return strings.Trim(fmt.Sprintf("p2pfault-%.30s-%s", run, target), "-")
}

// Partition cuts the target's pod off: recorded, then marked, then the
// policy made.
func (n network) Partition(target string, _ ...int) error {
	c := n.c
	t, err := c.byName(target)
	if err != nil {
		return err
	}
	ctx := context.Background()
	ns, name := c.cfg.Namespace, c.policyName(target)
	value := name // the mark's value: which policy selects the pod
	for _, r := range []Record{{Kind: "Pod", Namespace: ns, Name: t.where().pod, Label: LabelCut}, {Kind: "NetworkPolicy", Namespace: ns, Name: name}} {
		if err := c.book.add(r); err != nil {
			return err
		}
	}
	if err := mark(ctx, c.cs, ns, t.where().pod, LabelCut, value); err != nil {
		return fault.NotTaken(fmt.Errorf("label pod %s %s: %w", t.where().pod, LabelCut, err))
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: ownLabels(c.cfg.Run)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelCut: value}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if _, err := c.cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		unmark(ctx, c.cs, ns, t.where().pod, LabelCut)
		return fault.NotTaken(fmt.Errorf("create NetworkPolicy %s: %w", name, err))
	}
	c.cuts.put(target, cut{pod: t.where().pod, policy: name, what: "partition"})
	return nil
}

// Heal deletes the target's policy and unmarks its pod, or deletes its
// NetworkChaos.
func (n network) Heal(target string) error {
	c := n.c
	c.cuts.mu.Lock()
	cu, ok := c.cuts.by[target]
	delete(c.cuts.by, target)
	c.cuts.mu.Unlock()
	if !ok {
		return fmt.Errorf("%s: no network fault in force", target)
	}
	return c.heal(context.Background(), cu)
}

func (c *Cluster) heal(ctx context.Context, cu cut) error {
	ns := c.cfg.Namespace
	if cu.chaos != "" {
		return deleteChaos(ctx, c.cs, ns, cu.chaos)
	}
	err := c.cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, cu.policy, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete NetworkPolicy %s: %w", cu.policy, err)
	}
	return unmark(ctx, c.cs, ns, cu.pod, LabelCut)
}

// healAll heals every cut still in force (the run's end).
func (cs *cuts) healAll(ctx context.Context, c *Cluster) error {
	cs.mu.Lock()
	all := cs.by
	cs.by = nil
	cs.mu.Unlock()
	var first error
	for _, cu := range all {
		if err := c.heal(ctx, cu); err != nil && first == nil {
			first = err
		}
	}
	return first
}
