package fault

import (
	"fmt"
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
	CrashCore(rank int) (at time.Time, err error)
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

// actGone kills rank 0's core, then cuts the whole source off; its window
// lasts to the end of the run (the run's end deletes the cut).
func actGone(f *Fire) error {
	env := f.Env
	nt, nw, err := netOf(f)
	var at time.Time
	if err == nil {
		at, err = f.Target.(CoreCrasher).CrashCore(0)
	}
	if err == nil {
		err = nw.Partition(cutName(nt), nt.Ports()...)
	}
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
