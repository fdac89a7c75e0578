package fault

import (
	"context"
	"fmt"
	"time"

	"p2pfault/event"
)

// ActionRemove ends a source (SIGTERM) and leaves it down.
const ActionRemove = "remove"

// removeTimeout bounds the wait for a removed target's processes to go.
const removeTimeout = time.Minute

func init() {
	Register(&Kind{
		Ranks: RankEngine,
		Name:  ActionRemove, Key: "r", Help: "remove", LongHelp: "remove (SIGTERM)", Order: 40,
		Needs: event.CondUp, Leaves: event.CondRemoved, Badge: "REMOVED",
		Opens: true, Ending: StaysDown, Case: SeedCase,
		Act: actRemove, Verify: verifyRemove,
	})
}

// actRemove returns once the target is gone; its window lasts to the end
// of the run (it does not recover by itself).
func actRemove(f *Fire) error {
	env := f.Env
	ctx, cancel := context.WithTimeout(env.Context(), removeTimeout)
	defer cancel()
	var at time.Time
	f.before, f.hasHost = observe(f.Target) // its addresses, for verifyRemove
	err := f.Target.Terminate(ctx, func(t time.Time, _ error) { at = t })
	if err != nil {
		err = fmt.Errorf("remove %s: %w", f.Target.Name(), err)
		env.Record(ActionRemove, 0, f.By, err)
		return err
	}
	f.Enter()
	env.Record(ActionRemove, 0, f.By, nil)
	env.OpenWindow(at, false)
	env.Changed()
	return nil
}
