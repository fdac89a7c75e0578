package kube

import (
	"context"
	"fmt"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Need is one verb a run asks of the API server, and what for: the rules
// of docs/kubernetes.md's RBAC manifest.
type Need struct {
	Group, Resource, Subresource, Verb string
	For                                string
	// ChaosMesh: asked only where the cluster serves Chaos Mesh's
	// NetworkChaos (a run elsewhere refuses loss, and needs none).
	ChaosMesh bool
}

// What is the need as kubectl's `auth can-i` names it.
func (n Need) What() string {
	r := n.Resource
	if n.Subresource != "" {
		r += "/" + n.Subresource
	}
	if n.Group != "" {
		r += "." + n.Group
	}
	return n.Verb + " " + r
}

// Needs are every verb a run on --kube may use.
var Needs = []Need{
	{Resource: "pods", Verb: "get", For: "read the engines' pods"},
	{Resource: "pods", Verb: "list", For: "find the engines by label"},
	{Resource: "pods", Verb: "patch", For: "mark a stalled or cut pod"},
	{Resource: "pods", Subresource: "exec", Verb: "create", For: "stall, resume, kill"},
	{Resource: "pods", Verb: "delete", For: "replace"},
	{Resource: "events", Verb: "list", For: "the pods' events in the run's log"},
	{Resource: "events", Verb: "watch", For: "the pods' events in the run's log"},
	{Group: "networking.k8s.io", Resource: "networkpolicies", Verb: "create", For: "partition"},
	{Group: "networking.k8s.io", Resource: "networkpolicies", Verb: "delete", For: "heal, cleanup --kube"},
	{Group: "chaos-mesh.org", Resource: "networkchaos", Verb: "create", For: "loss, latency, bandwidth by Chaos Mesh", ChaosMesh: true},
	{Group: "chaos-mesh.org", Resource: "networkchaos", Verb: "get", For: "their verification", ChaosMesh: true},
	{Group: "chaos-mesh.org", Resource: "networkchaos", Verb: "delete", For: "heal, unlink, cleanup --kube", ChaosMesh: true},
}

// Access is whether the API server allows a Need.
type Access struct {
	Need
	Allowed bool
	Reason  string // the server's, when it gives one
}

// Access asks the API server, for each Need in the configured namespace,
// whether this user may (a SelfSubjectAccessReview each); Chaos Mesh's
// only where the cluster serves NetworkChaos.
func (c Config) Access(ctx context.Context) ([]Access, error) {
	cs, _, err := c.client()
	if err != nil {
		return nil, err
	}
	chaos := chaosMesh(ctx, cs) == nil
	var out []Access
	for _, n := range Needs {
		if n.ChaosMesh && !chaos {
			continue
		}
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: c.Namespace, Verb: n.Verb, Group: n.Group, Resource: n.Resource, Subresource: n.Subresource,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("ask the API server whether this user may %s: %w", n.What(), err)
		}
		out = append(out, Access{Need: n, Allowed: r.Status.Allowed, Reason: r.Status.Reason})
	}
	return out, nil
}
