package fault

import (
	"fmt"
	"time"

	"p2pfault/event"
	"p2pfault/netfault"
)

// ActionPartition drops every packet to or from every port a source
// listens on (HTTP and P2P, both directions, no reset) for a duration, or
// until heal: the host is gone from the network.
const ActionPartition = "partition"

func init() {
	Register(&Kind{
		Ranks: RankAlone,
		Name:  ActionPartition, Key: "n", Help: "partition", LongHelp: "partition (drop)", Order: 60,
		TakesFor: true, Needs: event.CondUp, Leaves: event.CondNetwork, Badge: "PARTITIONED", MoreHelp: true,
		Opens: true, Ending: EndsAfterFor, Case: OwnCase, Pairs: true,
		Act:    func(f *Fire) error { return actNet(f, ActionPartition, 100) },
		Verify: verifyPartition,
		Setup:  func() error { return netfault.Check(ActionPartition) }, HostFirewall: true,
		Can: canNet,
	})
}

// verifyPartition confirms from p2pfault's side that the source's P2P port
// is cut off: a connect hangs instead of completing or being refused.
func verifyPartition(f *Fire) Effect {
	if f.Peer != "" {
		return verifyPair(f, true)
	}
	nt, ok := f.Target.(NetTarget)
	if !ok {
		return Effect{Skipped: true}
	}
	start := time.Now()
	if err := f.Verifier.Partitioned(f.Env.Context(), nt.P2PAddr(), verifyWait); err != nil {
		return Effect{After: time.Since(start), Detail: err.Error()}
	}
	// Partitioned returns once the connect hung for the whole wait: the
	// drop was in force from the action on.
	ef := Effect{OK: true, Detail: fmt.Sprintf("a connect to %s hangs (no answer within %v)", nt.P2PAddr(), verifyWait)}
	return withCut(f.Target, ef, "partition")
}

// withCut adds to a network kind's effect what a Reporter says its
// cluster holds on its links: the effect stands only if that is want
// ("" none), so a cut the connects saw but the cluster does not hold (or
// the reverse) is not taken for the fault.
func withCut(t Target, ef Effect, want string) Effect {
	r, ok := t.(Reporter)
	if !ok {
		return ef
	}
	cut := r.Report().Cut
	switch {
	case cut != want && want == "":
		ef.OK = false
		ef.Detail += fmt.Sprintf("; but the cluster still holds %q on its links", cut)
	case cut != want:
		ef.OK = false
		ef.Detail += fmt.Sprintf("; but the cluster holds %q on its links, not %s", cut, want)
	case cut != "":
		ef.Detail += fmt.Sprintf("; the cluster holds %s on its links", cut)
	default:
		ef.Detail += "; the cluster holds no cut on its links"
	}
	return ef
}
