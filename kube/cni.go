package kube

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A partition on --kube is a NetworkPolicy, which only the cluster's
// network plugin enforces: on one that ignores policies (kindnet, flannel)
// it is an object that changes nothing. The API has no field that says
// which plugin runs, so doctor looks for the agents of the known ones:
// DaemonSet pods in the namespaces their manifests install into.

// cniNamespaces are where the known plugins' agents run: kube-system
// (most), calico-system (Calico's operator), kube-flannel (flannel's own
// manifest).
var cniNamespaces = []string{"kube-system", "calico-system", "kube-flannel"}

// cniAgent is a plugin known by its agent's DaemonSet name.
type cniAgent struct {
	daemonSet, cni string
	enforces       bool
}

// cniAgents: the plugins that enforce NetworkPolicy, then those known not
// to (whose presence says why nothing will). GKE's Dataplane V2 is Cilium
// as anetd; canal is flannel with Calico's policy agent.
var cniAgents = []cniAgent{
	{"cilium", "cilium", true}, {"anetd", "cilium (GKE Dataplane V2)", true},
	{"calico-node", "calico", true}, {"canal", "canal (Calico's policy)", true},
	{"antrea-agent", "antrea", true}, {"kube-router", "kube-router", true},
	{"weave-net", "weave-net", true}, {"azure-npm", "azure-npm", true},
	{"kindnet", "kindnet", false}, {"kube-flannel-ds", "flannel", false}, {"flannel", "flannel", false},
}

// CNI is what doctor could tell of the cluster's NetworkPolicy plugin.
type CNI struct {
	Enforcer string // the enforcing plugin found ("": none)
	Ignorer  string // a plugin found that enforces no policy ("": none)
	Pod      string // namespace/name of the agent pod that says so
	// Unread are the namespaces whose pods could not be listed, with why.
	Unread []string
}

// FindCNI looks for a running agent of a known plugin in cniNamespaces:
// a pod its DaemonSet owns, or named as that DaemonSet's pods are
// (DAEMONSET-xxxxx). Only a Running pod counts: a DaemonSet with no pod
// up enforces nothing.
func (c Config) FindCNI(ctx context.Context) (CNI, error) {
	cs, _, err := c.client()
	if err != nil {
		return CNI{}, err
	}
	var found CNI
	for _, ns := range cniNamespaces {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsForbidden(err):
			found.Unread = append(found.Unread, ns+" (forbidden)")
			continue
		case err != nil:
			found.Unread = append(found.Unread, fmt.Sprintf("%s (%v)", ns, err))
			continue
		}
		for _, p := range l.Items {
			a, ok := agentOf(p)
			if !ok || p.Status.Phase != corev1.PodRunning {
				continue
			}
			switch {
			case a.enforces && found.Enforcer == "":
				found.Enforcer, found.Pod = a.cni, ns+"/"+p.Name
			case !a.enforces && found.Ignorer == "":
				found.Ignorer = a.cni
				if found.Enforcer == "" {
					found.Pod = ns + "/" + p.Name
				}
			}
		}
	}
	return found, nil
}

// agentOf is the known plugin whose agent p is.
func agentOf(p corev1.Pod) (cniAgent, bool) {
	for _, a := range cniAgents {
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" && o.Name == a.daemonSet {
				return a, true
			}
		}
		if rest, ok := strings.CutPrefix(p.Name, a.daemonSet+"-"); ok && len(rest) == 5 && !strings.Contains(rest, "-") {
			return a, true
		}
	}
	return cniAgent{}, false
}

// Namespaces is where FindCNI looks, for its words.
func (CNI) Namespaces() string { return strings.Join(cniNamespaces, ", ") }
