package kube

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// EventPrefix begins the log line a pod's event becomes (the run keeps
// lines with it as events: experiment's interesting lines).
const EventPrefix = "pod event"

// watchEvents tells onLog, from this one goroutine and in order, every
// Event the API server records from now on about a pod one of the run's
// engines is on (the kubelet's Killing, BackOff, Unhealthy; a controller's
// SuccessfulDelete; ...), as a line of that engine's log:
// "pod event src-a: Warning BackOff: Back-off restarting failed container".
// A watch that ends is made again from the last version seen; it stops
// with ctx.
func (c *Cluster) watchEvents(ctx context.Context, onLog func(engine, line string)) {
	events := c.cs.CoreV1().Events(c.cfg.Namespace)
	var version string
	for ctx.Err() == nil {
		if version == "" {
			l, err := events.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				sleepCtx(ctx, refreshEvery)
				continue
			}
			version = l.ResourceVersion // from now on: no event of before the run
		}
		w, err := events.Watch(ctx, metav1.ListOptions{ResourceVersion: version, FieldSelector: "involvedObject.kind=Pod"})
		if err != nil {
			version = "" // too old, or the server is away: list again
			sleepCtx(ctx, refreshEvery)
			continue
		}
		for ev := range w.ResultChan() {
			e, ok := ev.Object.(*corev1.Event)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			version = e.ResourceVersion
			for _, t := range c.Targets() {
				if t.where().pod == e.InvolvedObject.Name {
					onLog(t.name, fmt.Sprintf("%s %s: %s %s: %s", EventPrefix, e.InvolvedObject.Name, e.Type, e.Reason, e.Message))
				}
			}
		}
		w.Stop()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
