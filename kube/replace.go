package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"p2pfault/event"
	"p2pfault/fault"
)

var _ fault.Replacer = (*Target)(nil)

// CanReplace: a pod can be replaced when a controller owns it (an
// ownerReference with controller: true, as a ReplicaSet's or a
// StatefulSet's pods have): deleted, a bare pod would not come back.
func (t *Target) CanReplace() error {
	ctx, cancel := context.WithTimeout(context.Background(), planTimeout)
	defer cancel()
	_, err := t.owner(ctx)
	return err
}

// owner is the UID of the controller of the engine's pod.
func (t *Target) owner(ctx context.Context) (types.UID, error) {
	pod := t.where().pod
	p, err := t.c.cs.CoreV1().Pods(t.c.cfg.Namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("pod %s: %w", pod, err)
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return "", fmt.Errorf("pod %s has no controller (no ownerReference with controller: true): deleted, it would not come back", pod)
	}
	return ref.UID, nil
}

// Replace deletes the engine's pod (grace period 0: its containers are
// killed at once) and waits, within killReadyWithin, for its controller's
// new pod: one the same controller owns, matching the same selector,
// that no target of the run is on, Running with an address; the target
// moves to it (new name, new address) and Replace returns once its engine
// answers /health. signalled is told once the API server took the delete.
func (t *Target) Replace(ctx context.Context, signalled func(time.Time, error)) (time.Time, error) {
	uid, err := t.owner(ctx)
	old := t.where().pod
	if err == nil {
		zero := int64(0)
		err = t.c.cs.CoreV1().Pods(t.c.cfg.Namespace).Delete(ctx, old, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil {
			err = fmt.Errorf("delete pod %s: %w", old, err)
		}
	}
	if signalled != nil {
		signalled(time.Now(), err)
	}
	if err != nil {
		return time.Time{}, fault.NotTaken(err)
	}
	ctx, cancel := context.WithTimeout(ctx, killReadyWithin)
	defer cancel()
	for {
		if p, ok := t.c.successor(ctx, t, uid); ok {
			if err := t.moveTo(p); err == nil && t.ready(ctx) == nil {
				return time.Now(), nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("pod %s deleted: no new pod of its controller answered within %s: %w", old, killReadyWithin, ctx.Err())
		case <-time.After(pollEvery):
		}
	}
}

// successor is the first pod (byOrder) of t's selector that the
// controller uid owns, that no target of the run is on and that is
// Running with an IP.
func (c *Cluster) successor(ctx context.Context, t *Target, uid types.UID) (corev1.Pod, bool) {
	sel, flag := c.cfg.Sources, "--kube-sources"
	if t.role == event.RoleDecoder {
		sel, flag = c.cfg.Decoder, "--kube-decoder"
	}
	pods, err := c.cfg.list(ctx, c.cs, flag, sel)
	if err != nil {
		return corev1.Pod{}, false
	}
	taken := map[string]bool{}
	for _, o := range c.Targets() {
		taken[o.where().pod] = true
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref != nil && ref.UID == uid && !taken[p.Name] && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p, true
		}
	}
	return corev1.Pod{}, false
}

// moveTo makes pod p the target's: its container, addresses, and a new
// instance (the restarts counted on the old pod stay in it).
func (t *Target) moveTo(p corev1.Pod) error {
	at, err := t.c.cfg.placeOf(p)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.where().pod == p.Name {
		return nil
	}
	t.pods += t.restarts + t.seen + 1
	t.restarts, t.seen, t.lastMain = 0, 0, 0
	t.at.Store(at)
	return nil
}
