package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"p2pfault/attach"
	"p2pfault/doctor"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/kube"
	"p2pfault/owner"
)

// kubeFlags are --kube and the flags that say where its engines are.
type kubeFlags struct {
	on                  bool
	kubeconfig, context string
	namespace           string
	sources, decoder    string
	container           string
	httpPort, p2pPort   string
	// file is the attach file whose kubernetes: block these are ("":
	// the flags), for doctor's words.
	file string
}

func (k *kubeFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&k.on, "kube", false, "probe and fault engines running as pods of a Kubernetes cluster, found by --kube-sources and --kube-decoder in --kube-namespace, through its API server (see docs/kubernetes.md)")
	k.registerAccess(fs)
	fs.StringVar(&k.sources, "kube-sources", "", "with --kube: label selector of the source pods (e.g. llm-d.ai/role=prefill); source-0 is the oldest pod, then by name")
	fs.StringVar(&k.decoder, "kube-decoder", "", "with --kube: label selector of the decoder pods (e.g. llm-d.ai/role=decode); several are decoder-0..N-1, oldest first, then by name")
	fs.StringVar(&k.container, "kube-container", "", "with --kube: the engine's container in each pod (default: the pod's first)")
	fs.StringVar(&k.httpPort, "kube-http-port", kube.DefaultHTTPPortName, "with --kube: the engine container's HTTP port: its name in the pod, or a number")
	fs.StringVar(&k.p2pPort, "kube-p2p-port", kube.DefaultP2PPortName, "with --kube: the engine container's P2P port: its name in the pod, or a number")
}

// registerAccess are the flags that reach the API server (run, slice and
// cleanup --kube share them).
func (k *kubeFlags) registerAccess(fs *pflag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "with --kube: the kubeconfig file (default: kubectl's rules, $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&k.context, "context", "", "with --kube: the kubeconfig context (default: its current one)")
	fs.StringVar(&k.namespace, "kube-namespace", "", "with --kube: the namespace of the engines' pods (cleanup --kube: the one to sweep, default every namespace)")
}

// kubeOnly are the flags that mean nothing without --kube.
var kubeOnly = []string{"kubeconfig", "context", "kube-namespace", "kube-sources", "kube-decoder", "kube-container", "kube-http-port", "kube-p2p-port"}

// check refuses what --kube cannot take, and --kube's flags without it.
func (k *kubeFlags) check(fs *pflag.FlagSet, attach string) error {
	if !k.on {
		for _, n := range kubeOnly {
			if fs.Changed(n) {
				return exitcode.Usagef("--%s: only with --kube", n)
			}
		}
		return nil
	}
	if attach != "" {
		return exitcode.Usagef("--kube and --attach: give one (the engines are pods of a cluster, or listed in an attach file)")
	}
	var bad []string
	for _, name := range launchFlags {
		if name != "model" && fs.Changed(name) {
			bad = append(bad, "--"+name)
		}
	}
	if len(bad) > 0 {
		return exitcode.Usagef("--kube: %s launch engines, and a Kubernetes cluster's engines are already running (found by label): drop %s", strings.Join(bad, ", "), strings.Join(bad, ", "))
	}
	return nil
}

// kubeFromAttach takes an attach file's `kubernetes:` block as --kube and
// its flags (and the file's model, and its mode unless --mode is given):
// one way to say where the pods are, so beside it --kube's flags and
// --model are a usage error. A file without the block, or one that does
// not parse, is left to --attach.
func (f *clusterFlags) kubeFromAttach(fs *pflag.FlagSet) error {
	if f.attach == "" || f.kube.on {
		return nil // --kube with --attach: check says give one
	}
	file, err := kubeBlock(f.attach, fs, append([]string{"model"}, kubeOnly...), "where the pods are and its model: what they serve")
	if err != nil || file == nil {
		return err
	}
	f.kube = blockFlags(file)
	f.model, f.attach = file.Model, ""
	if file.Mode != "" && !fs.Changed("mode") {
		f.mode = file.Mode
	}
	return nil
}

// kubeBlock is attach file path when it has a `kubernetes:` block, its
// selectors checked (a bad one names its key); nil when it has none or
// does not parse (--attach's to report, in its order, with its words).
// Each of flags given beside the block says what it says again (what):
// a usage error naming it.
func kubeBlock(path string, fs *pflag.FlagSet, flags []string, what string) (*attach.File, error) {
	file, err := attach.Load(path)
	if err != nil || file.Kubernetes == nil {
		return nil, nil
	}
	for _, n := range flags {
		if fs.Lookup(n) != nil && fs.Changed(n) {
			return nil, exitcode.Usagef("--attach %s: its kubernetes: block says %s, and --%s would say it again: drop --%s", path, what, n, n)
		}
	}
	k := file.Kubernetes
	for _, sel := range []struct{ key, v string }{{"sources", k.Sources}, {"decoder", k.Decoder}} {
		if err := kube.CheckSelector(sel.v); err != nil {
			return nil, exitcode.Usagef("%s:%d: kubernetes.%s %q: not a label selector: %v", path, k.Line, sel.key, sel.v, err)
		}
	}
	return file, nil
}

// blockFlags are --kube and the flags a kubernetes: block stands for.
func blockFlags(file *attach.File) kubeFlags {
	k := file.Kubernetes
	return kubeFlags{on: true, kubeconfig: k.Kubeconfig, context: k.Context, namespace: k.Namespace, sources: k.Sources, decoder: k.Decoder,
		container: k.Container, httpPort: cmp.Or(k.HTTPPort, kube.DefaultHTTPPortName), p2pPort: cmp.Or(k.P2PPort, kube.DefaultP2PPortName),
		file: file.Path}
}

// opener is the Kubernetes cluster the flags describe, labelled with this
// process's owner tag as the run's id.
func (k *kubeFlags) opener(model string) (experiment.Opener, error) {
	self, err := owner.Self()
	if err != nil {
		return nil, fmt.Errorf("--kube: the run's id: %w", err)
	}
	return kube.Opener{Config: kube.Config{
		Kubeconfig: k.kubeconfig, Context: k.context, Namespace: k.namespace,
		Sources: k.sources, Decoder: k.decoder, Container: k.container,
		HTTPPort: k.httpPort, P2PPort: k.p2pPort, Model: model, Run: self.Tag(),
	}}, nil
}

// addKubeCleanupFlag gives cleanup --kube: sweep the cluster by label (no
// run folder needed), after DIR's records when one is given. An attach
// file (--attach) with a kubernetes: block is --kube with the block's
// kubeconfig, context, namespace and container.
func addKubeCleanupFlag(cmd *cobra.Command) {
	var k kubeFlags
	cmd.Flags().BoolVar(&k.on, "kube", false, "also sweep the Kubernetes cluster by label: delete every object labelled app.kubernetes.io/managed-by=p2pfault, resume every pod labelled p2pfault.io/stalled and unlabel every pod labelled p2pfault.io/cut (with --kube-namespace, that namespace only); without DIR, only that. An --attach file's kubernetes: block is --kube with its settings")
	k.registerAccess(cmd.Flags())
	cmd.Flags().StringVar(&k.container, "kube-container", "", "with --kube: the engine's container in each pod (default: the pod's first)")
	records := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if path, _ := cmd.Flags().GetString("attach"); path != "" {
			file, err := kubeBlock(path, cmd.Flags(), []string{"kube", "kubeconfig", "context", "kube-namespace", "kube-container"}, "which cluster and namespace to sweep")
			if err != nil {
				return err
			}
			if file != nil {
				k = blockFlags(file)
			}
		}
		if !k.on {
			if err := k.check(cmd.Flags(), ""); err != nil {
				return err
			}
			return records(cmd, args)
		}
		if len(args) > 0 || cmd.Flags().Changed("orphans") {
			if err := records(cmd, args); err != nil {
				return err
			}
		}
		w := cmd.OutOrStdout()
		n, err := kube.Sweep(cmd.Context(), kube.SweepConfig{Kubeconfig: k.kubeconfig, Context: k.context, Namespace: k.namespace, Container: k.container}, w)
		if err != nil {
			return exitcode.AsUsage(fmt.Errorf("cleanup --kube: %w", err))
		}
		fmt.Fprintf(w, "cleanup --kube: %d object(s) deleted or unlabelled\n", n)
		return nil
	}
}

// kube refuses what a slice on --kube cannot do: its rows fault the same
// pods, so they run one at a time, on one arm, with no sweep.
func (o *sliceOptions) kube(cmd *cobra.Command) error {
	fs := cmd.Flags()
	if err := o.flags.kubeFromAttach(fs); err != nil {
		return err
	}
	if err := o.flags.kube.check(fs, o.flags.attach); err != nil || !o.flags.kube.on {
		return err
	}
	switch {
	case len(o.sweeps) > 0:
		return exitcode.Usagef("--sweep sets the engines p2pfault starts; with --kube the engines are your pods: set them and run a slice per value")
	case o.parallel > 1:
		return exitcode.Usagef("--parallel %d with --kube: every row faults the same pods, so rows run one at a time", o.parallel)
	}
	o.parallel = 1
	switch {
	case fs.Changed("arms") && len(o.arms) != 1:
		return exitcode.Usagef("--kube: --arms %s: the pods are one cluster, so one arm; give one name (a label for the reports), e.g. --arms main", strings.Join(o.arms, ","))
	case !fs.Changed("arms"):
		o.arms = []string{"main"}
	}
	if !fs.Changed("cases") {
		// The seed's cases that a pod can take (remove is refused: see
		// kube.CanTake); --cases remove says why.
		var cases []string
		for _, c := range o.cases {
			if k, ok := fault.CaseKind(c); ok && kube.CanTake(k) == nil {
				cases = append(cases, c)
			}
		}
		o.cases = cases
	}
	return nil
}

// kubeDoctor is `doctor --kube`: the pods the selectors find and every
// verb a run needs, asked of the API server, each missing one named.
// file is the attach file whose kubernetes: block cfg is ("": the flags),
// so the fixes name what to change where it was said.
// kinds are the run's fault kinds (a loss needs Chaos Mesh).
func kubeDoctor(cmd *cobra.Command, cfg kube.Config, file string, kinds []string) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	podsFix, accessFix := "check --kube-namespace, --kube-sources, --kube-decoder and the pods' named ports", "check --kubeconfig and --context"
	if file != "" {
		podsFix = "check namespace, sources, decoder, http_port and p2p_port in the kubernetes: block of " + file + ", and the pods' named ports"
		accessFix = "check kubeconfig and context in the kubernetes: block of " + file
	}
	var results []doctor.Result
	if _, err := (kube.Opener{Config: cfg}).Plan(nil); err != nil {
		results = append(results, doctor.Result{Check: "kube pods", Found: err.Error(), Fix: podsFix})
	} else {
		results = append(results, doctor.Result{Check: "kube pods", OK: true, Found: fmt.Sprintf("sources %q and decoder %q found in namespace %s", cfg.Sources, cfg.Decoder, cfg.Namespace)})
	}
	access, err := cfg.Access(cmd.Context())
	if err != nil {
		results = append(results, doctor.Result{Check: "kube access", Found: err.Error(), Fix: accessFix})
	}
	for _, a := range access {
		r := doctor.Result{Check: "kube access", OK: a.Allowed, Found: fmt.Sprintf("%s in %s (%s): allowed", a.What(), cfg.Namespace, a.For)}
		if !a.Allowed {
			r.Found = fmt.Sprintf("%s in %s (%s): not allowed%s", a.What(), cfg.Namespace, a.For, map[bool]string{true: "", false: ": " + a.Reason}[a.Reason == ""])
			r.Fix = "grant it: the Role in docs/kubernetes.md (RBAC)"
		}
		results = append(results, r)
	}
	var chaos []string // the run's kinds that are a NetworkChaos
	for _, k := range kinds {
		if kube.NeedsChaosMesh(k) && !slices.Contains(chaos, k) {
			chaos = append(chaos, k)
		}
	}
	results = append(results, cniResult(cmd.Context(), cfg), chaosMeshResult(cmd.Context(), cfg, chaos))
	out := cmd.OutOrStdout()
	for _, r := range results {
		fmt.Fprintln(out, r)
	}
	if n := doctor.Failed(results); n > 0 {
		return &exitcode.Error{Code: exitcode.Failed, Err: fmt.Errorf("doctor: %d of %d checks failed", n, len(results))}
	}
	fmt.Fprintf(out, "doctor: all %d checks passed\n", len(results))
	return nil
}

// chaosMeshResult is doctor's line on Chaos Mesh's NetworkChaos, which a
// loss, a latency and a bandwidth on --kube are: a failure only when the
// run has one of them (kinds) and the cluster does not serve it.
func chaosMeshResult(ctx context.Context, cfg kube.Config, kinds []string) doctor.Result {
	r := doctor.Result{Check: "kube Chaos Mesh", OK: true}
	err := cfg.ChaosMesh(ctx)
	switch {
	case err == nil:
		r.Found = "NetworkChaos served (chaos-mesh.org/v1alpha1): a loss, latency or bandwidth is a NetworkChaos on the source's pod"
	case !errors.Is(err, kube.ErrNoChaosMesh):
		r.Warn, r.Found, r.Fix = true, "cannot tell whether the cluster serves Chaos Mesh's NetworkChaos: "+err.Error(), "a loss, latency or bandwidth step is refused where it does not"
	case len(kinds) > 0:
		what := strings.Join(kinds, ", ")
		r.OK, r.Found, r.Fix = false, err.Error()+": refused for the run's "+what, "install Chaos Mesh (chaos-mesh.org), or drop the run's "+what+" steps"
	default:
		r.Found = err.Error() + ": a loss, latency or bandwidth step would be refused (this run has none)"
	}
	return r
}

// cniResult is doctor's line on whether the cluster enforces the
// NetworkPolicy a partition is: a warning, never a failure, when no
// known enforcing plugin is found (p2pfault cannot tell every plugin, and
// a run without partition needs none).
func cniResult(ctx context.Context, cfg kube.Config) doctor.Result {
	r := doctor.Result{Check: "kube NetworkPolicy", OK: true}
	cni, err := cfg.FindCNI(ctx)
	if err != nil {
		r.Warn, r.Found = true, "cannot tell whether the CNI enforces NetworkPolicy: "+err.Error()
	}
	if cni.Enforcer != "" {
		r.Found = fmt.Sprintf("enforced by %s (its agent pod %s is Running)", cni.Enforcer, cni.Pod)
		return r
	}
	if err == nil {
		r.Warn = true
		r.Found = "no policy-enforcing CNI found (looked for the agents of Cilium, Calico, Antrea, kube-router, Weave Net, azure-npm in " + cni.Namespaces() + ")"
		if cni.Ignorer != "" {
			r.Found += fmt.Sprintf("; found %s (pod %s), which enforces no NetworkPolicy", cni.Ignorer, cni.Pod)
		}
		if len(cni.Unread) > 0 {
			r.Found += "; could not list pods in " + strings.Join(cni.Unread, ", ")
		}
	}
	r.Fix = "a partition is a NetworkPolicy, which only such a CNI enforces: its verification connects to the pod's P2P port from where p2pfault runs, and if the connect completes the partition is reported as not taken effect (a warning, and fault_took_effect fails)"
	return r
}
