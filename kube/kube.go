// Package kube is the Kubernetes cluster: the experiment.Opener of engines
// running as pods, found by label selectors in one namespace, beside the
// launched (launch), virtual (vcluster) and attached (attach) clusters.
// Its faults go through the API server: a stall and a kill by exec into
// the engine's container (exec.go, procs.go), a partition by a
// NetworkPolicy (network.go), whose enforcement doctor looks for
// (cni.go), a loss by a Chaos Mesh NetworkChaos (chaos.go). Everything it creates or marks carries its
// labels (labels.go), so `p2pfault cleanup --kube` sweeps it with no run
// folder.
package kube

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
)

// Engine is the RunInfo.Engine of a run on a Kubernetes cluster.
const Engine = "kubernetes"

// The named container ports an engine's pod declares, read unless the
// configuration gives numbers.
const (
	DefaultHTTPPortName = "http"
	DefaultP2PPortName  = "p2p"
)

// Config is where the engines are and how to reach the API server.
type Config struct {
	Kubeconfig string // "": kubectl's rules ($KUBECONFIG, ~/.kube/config)
	Context    string // "": the kubeconfig's current context
	Namespace  string
	Sources    string // label selector of the source pods
	Decoder    string // label selector of the decoder pods (one or more)
	Container  string // the engine's container ("": the pod's first)
	// HTTPPort and P2PPort name the container ports (or give their
	// numbers) the engine listens on: its OpenAI API and its P2P tier.
	HTTPPort, P2PPort string
	Model             string
	// Run is the run's id, the value of LabelRun on everything the run
	// creates (the owner tag of this p2pfault process).
	Run string
}

// Opener opens the cluster Config describes.
type Opener struct{ Config Config }

var _ experiment.Opener = Opener{}

// client is the clientset and REST config Config's kubeconfig gives.
func (c Config) client() (*clientset, *rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = 50, 100
	cs, err := newClientset(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cs, rc, nil
}

// Check says what is wrong with the configuration itself (exit 2).
func (c Config) Check() error {
	if c.Model == "" {
		return exitcode.Usagef("--kube: --model is required (what the engines serve: the probe's \"model\")")
	}
	if c.Namespace == "" {
		return exitcode.Usagef("--kube: --kube-namespace is required (the namespace the engines' pods run in)")
	}
	for flag, sel := range map[string]string{"--kube-sources": c.Sources, "--kube-decoder": c.Decoder} {
		if sel == "" {
			return exitcode.Usagef("--kube: %s is required (a label selector, e.g. app=vllm,role=prefill)", flag)
		}
		if err := CheckSelector(sel); err != nil {
			return exitcode.Usagef("--kube: %s %q: %v", flag, sel, err)
		}
	}
	return nil
}

// CheckSelector says what is wrong with a label selector (kubectl's
// syntax), for a caller that names where it came from (an attach file's
// key).
func CheckSelector(sel string) error {
	_, err := labels.Parse(sel)
	return err
}

// planTimeout bounds Plan's questions to the API server.
const planTimeout = 20 * time.Second

// Plan finds the pods (read only: nothing is changed) and checks the
// timeline's kinds against what a pod can take.
func (o Opener) Plan(tl fault.Timeline) (experiment.Plan, error) {
	if err := o.Config.Check(); err != nil {
		return experiment.Plan{}, err
	}
	for _, s := range tl {
		if err := CanTake(s.Kind); err != nil {
			return experiment.Plan{}, exitcode.Usagef("--kube: %s: %v (timeline step %q)", s.Kind.Name, err, s.String())
		}
		if s.OnRank {
			return experiment.Plan{}, exitcode.Usagef("--kube: %s of one data-parallel rank is not supported yet (a fault by exec reaches the whole pod): name the source (timeline step %q)", s.Kind.Name, s.String())
		}
		if s.Pair {
			// A NetworkPolicy or NetworkChaos here selects the source pod's
			// traffic, whichever decoder it is with.
			return experiment.Plan{}, exitcode.Usagef("--kube: %s of one decoder↔source pair is not supported (the NetworkPolicy or NetworkChaos acts on the source pod's traffic with every decoder): name the source alone (timeline step %q)", s.Kind.Name, s.String())
		}
	}
	cs, _, err := o.Config.client()
	if err != nil {
		return experiment.Plan{}, exitcode.Usagef("--kube: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), planTimeout)
	defer cancel()
	srcs, decs, err := o.Config.find(ctx, cs)
	if err != nil {
		return experiment.Plan{}, exitcode.AsUsage(err)
	}
	if err := needChaosMesh(ctx, cs, tl); err != nil {
		return experiment.Plan{}, err
	}
	ranks, err := o.Config.planRanks(srcs)
	if err != nil {
		return experiment.Plan{}, exitcode.AsUsage(err)
	}
	return experiment.Plan{Sources: len(srcs), Ranks: ranks, Decoders: len(decs), Model: o.Config.Model, Engine: Engine, OwnNetwork: true, ShapesLinks: true}, nil
}

// find lists the sources and the decoders, each in the documented order
// (byOrder): decoder-0 is the oldest decoder pod, as source-0 the oldest
// source pod.
func (c Config) find(ctx context.Context, cs *clientset) (srcs, decs []corev1.Pod, err error) {
	if srcs, err = c.list(ctx, cs, "--kube-sources", c.Sources); err != nil {
		return nil, nil, err
	}
	if decs, err = c.list(ctx, cs, "--kube-decoder", c.Decoder); err != nil {
		return nil, nil, err
	}
	isDecoder := map[string]bool{}
	for _, d := range decs {
		isDecoder[d.Name] = true
	}
	for _, s := range srcs {
		if isDecoder[s.Name] {
			return nil, nil, fmt.Errorf("pod %s matches both --kube-sources and --kube-decoder", s.Name)
		}
	}
	return srcs, decs, nil
}

// list is the pods sel matches, not being deleted, in source order: by
// the pod's creation time, then by name, so source-0 is the oldest pod
// (a StatefulSet's ordinal 0, a Deployment's first replica) and the order
// does not change while the pods live.
func (c Config) list(ctx context.Context, cs *clientset, flag, sel string) ([]corev1.Pod, error) {
	l, err := cs.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("%s %q: list pods in namespace %s: %w", flag, sel, c.Namespace, err)
	}
	var pods []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return nil, fmt.Errorf("%s %q: no pod in namespace %s matches", flag, sel, c.Namespace)
	}
	sort.SliceStable(pods, func(i, j int) bool { return byOrder(pods[i], pods[j]) })
	return pods, nil
}

// byOrder is the documented source order: older first, then by name.
func byOrder(a, b corev1.Pod) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Name < b.Name
}

// container is the engine's container of p.
func (c Config) container(p corev1.Pod) (corev1.Container, error) {
	if len(p.Spec.Containers) == 0 {
		return corev1.Container{}, fmt.Errorf("pod %s has no container", p.Name)
	}
	if c.Container == "" {
		return p.Spec.Containers[0], nil
	}
	for _, k := range p.Spec.Containers {
		if k.Name == c.Container {
			return k, nil
		}
	}
	return corev1.Container{}, fmt.Errorf("pod %s has no container %q (--kube-container)", p.Name, c.Container)
}

// port is the container port named (or numbered) want.
func port(p corev1.Pod, k corev1.Container, flag, want string) (int, error) {
	if n, err := strconv.Atoi(want); err == nil && n > 0 && n < 65536 {
		return n, nil
	}
	for _, cp := range k.Ports {
		if cp.Name == want {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("pod %s: container %s declares no port named %q (name it, or give the number with %s)", p.Name, k.Name, want, flag)
}

// address is where p's engine listens: its pod IP and the two ports.
func (c Config) address(p corev1.Pod) (ip string, httpPort, p2pPort int, err error) {
	k, err := c.container(p)
	if err != nil {
		return "", 0, 0, err
	}
	if httpPort, err = port(p, k, "--kube-http-port", or(c.HTTPPort, DefaultHTTPPortName)); err != nil {
		return "", 0, 0, err
	}
	if p2pPort, err = port(p, k, "--kube-p2p-port", or(c.P2PPort, DefaultP2PPortName)); err != nil {
		return "", 0, 0, err
	}
	if p.Status.PodIP == "" || net.ParseIP(p.Status.PodIP) == nil {
		return "", 0, 0, fmt.Errorf("pod %s has no IP yet (phase %s)", p.Name, p.Status.Phase)
	}
	return p.Status.PodIP, httpPort, p2pPort, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// chaosKind: k is a Chaos Mesh NetworkChaos on --kube (chaos.go).
func chaosKind(k *fault.Kind) bool { return k.Name == fault.ActionLoss || k.Shapes }

// NeedsChaosMesh says whether the kind named is a Chaos Mesh NetworkChaos
// on --kube (loss, latency, bandwidth).
func NeedsChaosMesh(kind string) bool {
	k, ok := fault.Lookup(kind)
	return ok && chaosKind(k)
}

// needChaosMesh refuses a timeline whose kinds are Chaos Mesh's
// NetworkChaos on a cluster that does not serve it (exit 2, naming the
// step).
func needChaosMesh(ctx context.Context, cs *clientset, tl fault.Timeline) error {
	for _, s := range tl {
		if !chaosKind(s.Kind) {
			continue
		}
		if err := chaosMesh(ctx, cs); err != nil {
			why := "a NetworkPolicy drops every packet or none"
			if s.Kind.Shapes {
				why = "p2pfault's links, which slow a link elsewhere, cannot run in the cluster"
			}
			return exitcode.Usagef("--kube: %s is a Chaos Mesh NetworkChaos on --kube (%s), and %v: install Chaos Mesh, or drop the step (timeline step %q)", s.Kind.Name, why, err, s.String())
		}
		return nil
	}
	return nil
}

// CanTake says why no pod can take kind k through this cluster.
func CanTake(k *fault.Kind) error {
	switch k.Name {
	case fault.ActionStall, fault.ActionResume, fault.ActionKill, fault.ActionReplace, fault.ActionPartition, fault.ActionHeal, fault.ActionBusy:
		return nil
	case fault.ActionLoss, fault.ActionLatency, fault.ActionBandwidth, fault.ActionUnlink:
		// A NetworkChaos, where the cluster serves it (Plan asks); unlink
		// ends the latency or bandwidth in force.
		return nil
	case fault.ActionRemove, fault.ActionRestore:
		return errRefused
	}
	// A message-grain kind acts in the link next to the decoder, which
	// --kube does not run in the cluster.
	return fmt.Errorf("not supported on --kube (a kind that acts on messages needs the link next to the decoder, which --kube cannot run in the cluster)")
}
