package experiment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
)

// Group is one run of N arms side by side: one experiment (one cluster)
// per arm, started at once, sharing one event bus (one stream, in order,
// each event naming its arm) and one t0, so the same timeline plays on
// every arm on the same clock. A run of one arm is a Group of one: the
// CLI has one code path for both. The faces know the arms only from the
// events.
type Group struct {
	arms []*Experiment
	bus  *bus
}

// NewGroup checks every arm's configuration and returns the group ready
// to Run. Arm names must be distinct: events are told apart by them.
func NewGroup(cfgs []Config) (*Group, error) {
	if len(cfgs) == 0 {
		return nil, exitcode.Usagef("no arm to run")
	}
	g := &Group{bus: newBus(len(cfgs))}
	line := newStartLine(len(cfgs))
	seen := map[string]bool{}
	for _, cfg := range cfgs {
		e, err := New(cfg)
		if err != nil {
			if len(cfgs) > 1 {
				return nil, fmt.Errorf("arm %s: %w", cfg.Arm, err)
			}
			return nil, err
		}
		if seen[e.cfg.Arm] {
			return nil, exitcode.Usagef("arm %q given twice", e.cfg.Arm)
		}
		seen[e.cfg.Arm] = true
		e.bus, e.line = g.bus, line
		g.arms = append(g.arms, e)
	}
	return g, nil
}

// Arms are the group's experiments, in the order given.
func (g *Group) Arms() []*Experiment { return append([]*Experiment(nil), g.arms...) }

// Subscribe returns the merged stream of every arm, closed once every arm
// has ended. Call it before Run.
func (g *Group) Subscribe() <-chan event.Event { return g.bus.subscribe() }

// Result is one arm's outcome.
type Result struct {
	Arm     string
	Verdict event.Verdict
	Err     error
}

// Run runs every arm at once and returns each arm's result, in order. An
// arm that cannot start (a setup error) stops the others: a comparison
// with one arm missing shows nothing.
func (g *Group) Run(ctx context.Context) []Result {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	res := make([]Result, len(g.arms))
	var wg sync.WaitGroup
	for i, e := range g.arms {
		if i > 0 {
			// The arms' run events come in the order given, so every
			// face lists the arms in that order.
			<-g.arms[i-1].begun
		}
		wg.Go(func() {
			v, err := e.Run(ctx)
			res[i] = Result{Arm: e.cfg.Arm, Verdict: v, Err: err}
			if err != nil && len(g.arms) > 1 && exitcode.Code(err) == exitcode.Usage && ctx.Err() == nil {
				cancel(fmt.Errorf("arm %s: %w", e.cfg.Arm, err))
			}
		})
	}
	wg.Wait()
	return res
}

// Fire takes action a on every arm at the same instant: one goroutine
// per arm, all released together, so each arm's fault event is stamped
// within scheduling noise of the others'. Every arm's check is asked
// first; when one refuses by the kind's rule, the fault fires on none (an
// A/B comparison needs the same fault on both) and Fire returns each
// arm's *fault.Refused, its Arm set.
func (g *Group) Fire(a fault.Action) error {
	return g.fireOn(g.arms, a)
}

// FireArm takes action a on one arm.
func (g *Group) FireArm(arm string, a fault.Action) error {
	e := g.arm(arm)
	if e == nil {
		return fmt.Errorf("no arm %q (the run's arms: %s)", arm, strings.Join(g.names(), ", "))
	}
	return g.fireOn([]*Experiment{e}, a)
}

func (g *Group) fireOn(arms []*Experiment, a fault.Action) error {
	acts := make([]fault.Action, len(arms))
	targets := make([]fault.Target, len(arms))
	errs := make([]error, len(arms))
	var refusals []error
	for j, e := range arms {
		acts[j] = e.keyed(a)
		targets[j], errs[j] = e.admit(acts[j])
		if r := fault.RefusalsIn(errs[j]); len(r) > 0 {
			if len(g.arms) > 1 {
				r[0].Arm = e.cfg.Arm
			}
			refusals = append(refusals, r[0])
		}
	}
	if len(refusals) == 1 {
		return refusals[0]
	}
	if len(refusals) > 0 {
		return errors.Join(refusals...)
	}
	if len(arms) == 1 {
		return arms[0].take(acts[0], targets[0], errs[0], byKey)
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	for j, e := range arms {
		wg.Go(func() {
			<-release
			if err := e.take(acts[j], targets[j], errs[j], byKey); err != nil {
				errs[j] = fmt.Errorf("%s: %w", e.cfg.Arm, err)
			}
		})
	}
	close(release)
	wg.Wait()
	return errors.Join(errs...)
}

// SetProbing pauses or resumes every arm's probe.
func (g *Group) SetProbing(on bool) {
	for _, e := range g.arms {
		e.SetProbing(on)
	}
}

// LogTail returns the last n lines of engine "ARM/ENGINE", or of ENGINE
// of the first arm.
func (g *Group) LogTail(engine string, n int) []string {
	if arm, name, ok := strings.Cut(engine, "/"); ok {
		if e := g.arm(arm); e != nil {
			return e.LogTail(name, n)
		}
		return nil
	}
	return g.arms[0].LogTail(engine, n)
}

func (g *Group) arm(name string) *Experiment {
	for _, e := range g.arms {
		if e.cfg.Arm == name {
			return e
		}
	}
	return nil
}

func (g *Group) names() []string {
	var out []string
	for _, e := range g.arms {
		out = append(out, e.cfg.Arm)
	}
	return out
}
