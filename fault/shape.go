package fault

import (
	"fmt"
	"time"
)

// A cluster whose engines' packets it can slow itself (Kubernetes with
// Chaos Mesh: a NetworkChaos of action delay or bandwidth on the source's
// pod) takes the kinds that only slow a link's bytes (Kind.Shapes:
// latency, bandwidth) through its targets, in place of the run's links,
// which it may not be able to run (on Kubernetes the decoder's pod cannot
// reach a relay on p2pfault's host). Such a fault is a LinkFault all the
// same: in force until unlink, its "for" or the run's end.

// Shaping is what a shaping kind asks of a Shaper's target: every packet
// it sends Latency ± Jitter late, or at Bandwidth bytes per second (0:
// unbounded).
type Shaping struct {
	Latency, Jitter time.Duration
	Bandwidth       float64
}

// Shaper is a Target whose cluster shapes its packets itself.
type Shaper interface {
	Target
	// Shape puts sh on the target's packets; Unshape takes it off.
	Shape(sh Shaping) error
	Unshape() error
	CutVerifier
}

// actShape puts the shaping kind's toxics on the target through its
// cluster and holds it as a link fault.
func actShape(f *Fire, sh Shaper, spec linkSpec) error {
	name := f.Kind.Name
	var err error
	switch {
	case f.Peer != "":
		err = fmt.Errorf("the cluster shapes every packet the source sends, not one pair's: name the source alone")
	case spec.toxics == nil:
		err = fmt.Errorf("nothing to shape")
	default:
		t := spec.toxics
		err = sh.Shape(Shaping{Latency: t.Latency, Jitter: t.Jitter, Bandwidth: t.Bandwidth})
	}
	if err != nil {
		err = fmt.Errorf("%s %s: %w", name, f.Target.Name(), err)
		f.Env.Record(name, f.For, f.By, err)
		return err
	}
	holdLink(f, &LinkFault{spec: spec, shaper: sh, at: time.Now(), done: make(chan struct{})})
	return nil
}
