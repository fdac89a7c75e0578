package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"p2pfault/safefile"
)

// The labels of everything p2pfault creates on a cluster, and the marks it
// puts on pods it changes, so a sweep finds them by label alone.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "p2pfault"
	LabelRun       = "p2pfault.io/run" // the run's id (its owner tag)
	// LabelCut marks a pod a NetworkPolicy of the run cuts off (a policy
	// selects pods by label only); LabelStalled a pod whose engine the run
	// stopped, so a sweep resumes it. Neither is on a pod otherwise.
	LabelCut     = "p2pfault.io/cut"
	LabelStalled = "p2pfault.io/stalled"
)

// RecordFile is the run folder's record of what the run created or marked
// on the cluster, written before each change.
const RecordFile = "kube.json"

// Record is one object the run created or marked.
type Record struct {
	Kind      string `json:"kind"` // NetworkPolicy, NetworkChaos, or Pod (a mark: Label)
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Label     string `json:"label,omitempty"`
}

// book keeps the run's records in its folder.
type book struct {
	mu   sync.Mutex
	path string // "": the run keeps no folder (tests)
	recs []Record
}

// add records r before the change it names is made.
func (b *book) add(r Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.recs = append(b.recs, r)
	if b.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(b.recs, "", "  ")
	if err != nil {
		return err
	}
	if err := safefile.Write(b.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("record %s before creating it: %w", r.Name, err)
	}
	return nil
}

func newBook(dir string) *book {
	if dir == "" {
		return &book{}
	}
	return &book{path: filepath.Join(dir, RecordFile)}
}

// ownLabels are the labels of an object the run creates.
func ownLabels(run string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelRun: run}
}

// unmark removes label key from pod ns/name (gone already: nothing to do).
func unmark(ctx context.Context, cs *clientset, ns, name, key string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: nil}}})
	_, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// mark sets label key=value on pod ns/name.
func mark(ctx context.Context, cs *clientset, ns, name, key, value string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{key: value}}})
	_, err := cs.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// SweepConfig is what `p2pfault cleanup --kube` sweeps.
type SweepConfig struct {
	Kubeconfig, Context string
	Namespace           string // "": every namespace
	Container           string
}

// Sweep deletes every object labelled managed-by=p2pfault (NetworkPolicy,
// and NetworkChaos where the cluster serves it), resumes every
// pod marked stalled and unmarks every pod marked cut, in ns ("" all),
// with no run folder: what a p2pfault that is gone left behind. It says
// what it did on w and returns how many objects it changed.
func Sweep(ctx context.Context, sc SweepConfig, w io.Writer) (int, error) {
	cfg := Config{Kubeconfig: sc.Kubeconfig, Context: sc.Context, Container: sc.Container}
	cs, rc, err := cfg.client()
	if err != nil {
		return 0, err
	}
	n := 0
	sel := metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedBy}
	nps, err := cs.NetworkingV1().NetworkPolicies(sc.Namespace).List(ctx, sel)
	if err != nil {
		return n, fmt.Errorf("list NetworkPolicies: %w", err)
	}
	for _, np := range nps.Items {
		if err := cs.NetworkingV1().NetworkPolicies(np.Namespace).Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("delete NetworkPolicy %s/%s: %w", np.Namespace, np.Name, err)
		}
		fmt.Fprintf(w, "cleanup --kube: deleted NetworkPolicy %s/%s (run %s)\n", np.Namespace, np.Name, np.Labels[LabelRun])
		n++
	}
	m, err := sweepChaos(ctx, cs, sc.Namespace, w)
	n += m
	if err != nil {
		return n, err
	}
	ex := execer{cs: cs, rc: rc}
	for _, key := range []string{LabelStalled, LabelCut} {
		pods, err := cs.CoreV1().Pods(sc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: key})
		if err != nil {
			return n, fmt.Errorf("list pods labelled %s: %w", key, err)
		}
		for _, p := range pods.Items {
			if key == LabelStalled {
				if err := resumePod(ctx, ex, cfg, p.Namespace, p.Name); err != nil {
					return n, err
				}
				fmt.Fprintf(w, "cleanup --kube: resumed the engine of pod %s/%s (run %s)\n", p.Namespace, p.Name, p.Labels[key])
			}
			if err := unmark(ctx, cs, p.Namespace, p.Name, key); err != nil {
				return n, fmt.Errorf("unlabel pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			fmt.Fprintf(w, "cleanup --kube: removed label %s from pod %s/%s\n", key, p.Namespace, p.Name)
			n++
		}
	}
	return n, nil
}

// resumePod continues every stopped process of pod ns/name's engine.
func resumePod(ctx context.Context, ex execer, cfg Config, ns, name string) error {
	p, err := ex.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("resume pod %s/%s: %w", ns, name, err)
	}
	k, err := cfg.container(*p)
	if err != nil {
		return err
	}
	ps, err := ex.procs(ctx, ns, name, k.Name)
	if err != nil {
		return err
	}
	if st, _ := ps.stopped(); len(st) > 0 {
		return ex.signal(ctx, ns, name, k.Name, "CONT", st)
	}
	return nil
}
