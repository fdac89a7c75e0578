package fault

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"p2pfault/event"
)

// ActionReplace kills a source (SIGKILL) and starts a new engine in its
// place on new ports, HTTP and P2P, in a new session: the source replaced
// at a new address, which the seed's slice does not cover (its kill
// restarts on the same ports). P2P sessions are keyed by host:port
// (reference §10), so the decoder meets the new engine with a new session;
// from the moment it is ready the probe names its address and never the
// old one again.
const ActionReplace = "replace"

// Replacer is a Target that can be replaced by a new engine on new
// addresses (an optional ability, as Inspectable is): the engines p2pfault
// launches, and an attached source whose file gives a replace command.
type Replacer interface {
	// CanReplace is nil when Replace can work on the target, else why not
	// (an attached source faulted locally: p2pfault restarts it from its
	// command line, which names its ports).
	CanReplace() error
	// Replace ends the target's engine at once (SIGKILL), starts a new one
	// on new ports in a new session and returns when it is ready; from
	// then on the target's addresses are the new engine's. signalled (if
	// set) is called as soon as the kill was sent, with its error.
	Replace(ctx context.Context, signalled func(at time.Time, err error)) (readyAt time.Time, err error)
}

func init() {
	Register(&Kind{
		Ranks: RankEngine,
		Name:  ActionReplace, Key: "R", Help: "replace", LongHelp: "replace (new ports)", Order: 35,
		Needs: event.CondUp, Leaves: event.CondRestarting, Badge: "REPLACED", MoreHelp: true,
		Opens: true, Ending: EndsWithRecovery, Case: OwnCase, NewAddress: true,
		Act: actReplace, Verify: verifyReplace, Can: canReplace,
	})
}

// canReplace: the target must be able to start an engine on new ports.
func canReplace(t Target) error {
	r, ok := t.(Replacer)
	if !ok {
		return fmt.Errorf("p2pfault cannot start another engine for %s on new ports", t.Name())
	}
	return r.CanReplace()
}

// actReplace returns once the kill is sent; the window opens then and
// closes once the new engine is ready and the probe names it.
func actReplace(f *Fire) error {
	env := f.Env
	r, ok := f.Target.(Replacer)
	if !ok {
		err := fmt.Errorf("replace %s: %w", f.Target.Name(), canReplace(f.Target))
		env.Record(ActionReplace, 0, f.By, err)
		return err
	}
	return restart(f, ActionReplace, r.Replace, replaced)
}

// replaced records the new engine ready. Changed comes first: it makes
// the probe name the new address (an address event); the window closes
// after that, so every pull of the recovery window names the new engine.
func replaced(f *Fire, readyAt time.Time, err error) {
	if err != nil {
		restarted(f, "replace", readyAt, err)
		return
	}
	env := f.Env
	env.Changed()
	f.Lift()
	env.Record(ActionReady, 0, f.By, nil)
	env.CloseWindow(time.Now())
}

// verifyReplace is verifyKill on the new address: every pid of the old
// session gone and the new engine answering its health check; and the new
// engine listens on other addresses than the old one did.
func verifyReplace(f *Fire) Effect {
	ef := verifyKill(f)
	if ef.Skipped || !ef.OK {
		return ef
	}
	now, ok := observe(f.Target)
	if !ok {
		return ef
	}
	var same []string
	for _, a := range now.addrs() {
		if slices.Contains(f.before.addrs(), a) {
			same = append(same, a)
		}
	}
	if len(same) > 0 {
		ef.OK = false
		ef.Detail += "; but the new engine listens on the old address " + strings.Join(same, ", ")
		return ef
	}
	ef.Detail += fmt.Sprintf(" at %s (was %s)", strings.Join(now.addrs(), ", "), strings.Join(f.before.addrs(), ", "))
	return ef
}
