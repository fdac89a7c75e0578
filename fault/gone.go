package fault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"p2pfault/event"
	"p2pfault/netfault"
)

// ActionGone is vLLM issue #56828's fault: a source pod goes away in the
// middle of its transfers. Its rank 0's engine core dies at once (SIGKILL:
// its connections reset, so the decoder sees that peer down within the
// second) and the rest of the pod leaves the network with it (every port
// of the source dropped, no reset: the sibling ranks' sessions hear
// nothing), and the source stays gone. The decoder's peer liveness is per
// control connection, so what its sibling ranks' loads in flight cost is
// what the per-rank breakdown shows.
const ActionGone = "gone"

func init() {
	Register(&Kind{
		Name: ActionGone, Help: "gone", LongHelp: "pod gone mid-transfer (#56828)", Order: 80,
		Needs: event.CondUp, Leaves: event.CondRemoved, Badge: "GONE",
		Opens: true, Ending: StaysDown, Case: OwnCase,
		Act:   actGone,
		Setup: func() error { return netfault.Check(ActionGone) }, HostFirewall: true,
		Can: canGone,
		Preset: &CasePreset{
			SourceDP: 2, Mode: event.ModePD,
			SimDecoderArgs: []string{"--sim-dead-session-loads=timeout"},
			SimSourceArgs:  []string{"--sim-transfer-bandwidth=6e6"},
			Why: "#56828: a source of several ranks in PD mode; its build kept a silent session's loads to " +
				"the load timeout; 6 MB/s makes a 384-token load (12.6 MB) last 2.1 s, so every rank has " +
				"loads in flight when the pod goes at the probe's 2 trials a second",
		},
	})
}

// CoreCrasher is a Target one of whose data-parallel engine cores can be
// killed alone (SIGKILL of its processes; the engine's front end then
// does what vLLM's does), with no restart.
type CoreCrasher interface {
	// RankTarget is one rank of the engine: its Ports are its own.
	RankTarget(rank int) (Target, error)
	// CrashCore kills rank's core and returns once its death is visible
	// (the kernel has closed its sockets, so its resets and FINs are
	// sent), with when the signal went.
	CrashCore(ctx context.Context, rank int) (at time.Time, err error)
}

func canGone(t Target) error {
	if err := canNet(t); err != nil {
		return err
	}
	if _, ok := t.(CoreCrasher); !ok {
		return fmt.Errorf("%s cannot have one engine core killed alone here", t.Name())
	}
	return nil
}

// actGone takes the source off in three steps, so that rank 0's death
// alone reaches the decoder: every port of the source but rank 0's P2P
// port is cut first (the sibling cores' connections go silent: their
// closing, when the front end ends them after rank 0's core, is dropped
// too, as when the pod's network is gone), then rank 0's core is killed
// and its death awaited (its resets and FINs are out), then every port is
// cut (the same cut's name, so the firewall swaps the rules at one
// instant). Its window opens at the kill and lasts to the end of the run
// (the run's end deletes the cut); a failure heals what was cut.
func actGone(f *Fire) error {
	env := f.Env
	at, err := gone(f)
	if err != nil {
		err = fmt.Errorf("%s %s: %w", ActionGone, f.Target.Name(), err)
		env.Record(ActionGone, 0, f.By, err)
		return err
	}
	f.Enter()
	env.Record(ActionGone, 0, f.By, nil)
	env.OpenWindow(at, false)
	env.Changed()
	return nil
}

// gone is actGone's three steps, and the kill's time.
func gone(f *Fire) (time.Time, error) {
	nt, nw, err := netOf(f)
	if err != nil {
		return time.Time{}, err
	}
	cc := f.Target.(CoreCrasher)
	rt, err := cc.RankTarget(0)
	if err != nil {
		return time.Time{}, err
	}
	if err := canNet(rt); err != nil {
		return time.Time{}, err
	}
	rank0 := rt.(NetTarget)
	name := CutName(nt)
	if rest := without(nt.Ports(), rank0.Ports()); len(rest) > 0 {
		if err := nw.Partition(name, rest...); err != nil {
			return time.Time{}, err
		}
	}
	at, err := cc.CrashCore(f.Env.Context(), 0)
	if err == nil {
		err = nw.Partition(name, nt.Ports()...)
	}
	if err != nil {
		if herr := nw.Heal(name); herr != nil && !errors.Is(herr, netfault.ErrNoFault) {
			err = errors.Join(err, fmt.Errorf("heal %s: %w", name, herr))
		}
		return time.Time{}, err
	}
	return at, nil
}

// without is ports less those in drop.
func without(ports, drop []int) []int {
	var out []int
	for _, p := range ports {
		if !slices.Contains(drop, p) {
			out = append(out, p)
		}
	}
	return out
}
