package fault

import (
	"fmt"
	"time"

	"p2pfault/event"
)

// ActionHeal ends the network fault (partition or loss) in force on a
// source now: its rules are deleted.
const ActionHeal = "heal"

func init() {
	Register(&Kind{
		Ranks: RankAlone,
		Name:  ActionHeal, Key: "h", Help: "heal", LongHelp: "heal network", Order: 70,
		Needs: event.CondNetwork, Leaves: event.CondUp, Hint: "heal it", MoreHelp: true,
		Closes: true, Ending: EndsWithRecovery, Pairs: true,
		Act:    actHeal,
		Verify: verifyHeal,
		Can:    canNet,
	})
}

// actHeal ends the cut in force; the cut's own goroutine records the heal
// and closes the window.
func actHeal(f *Fire) error {
	cut, _ := f.Env.Held().(*NetCut)
	if cut == nil {
		err := fmt.Errorf("cannot heal %s: it has no network fault in force", f.Target.Name())
		f.Env.Record(ActionHeal, 0, f.By, err)
		return err
	}
	return cut.HealBy(f.By)
}

// verifyHeal confirms that the source's P2P port answers again: a connect
// completes within verifyWait.
func verifyHeal(f *Fire) Effect {
	if f.Peer != "" {
		return verifyPair(f, false)
	}
	nt, ok := f.Target.(NetTarget)
	if !ok {
		return Effect{Skipped: true}
	}
	start := time.Now()
	if err := f.Verifier.Reachable(f.Env.Context(), nt.P2PAddr(), verifyWait); err != nil {
		return Effect{After: time.Since(start), Detail: fmt.Sprintf("a connect to %s did not complete within %v after the heal: %v", nt.P2PAddr(), verifyWait, err)}
	}
	return withCut(f.Target, Effect{OK: true, After: time.Since(start), Detail: fmt.Sprintf("a connect to %s completes", nt.P2PAddr())}, "")
}
