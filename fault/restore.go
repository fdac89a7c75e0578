package fault

import (
	"time"

	"p2pfault/event"
)

// ActionRestore brings a removed source back.
const ActionRestore = "restore"

func init() {
	Register(&Kind{
		Ranks: RankEngine,
		Name:  ActionRestore, Key: "u", Help: "restore", LongHelp: "restore removed", Order: 50,
		Needs: event.CondRemoved, Leaves: event.CondRestarting, Hint: "bring it back", Badge: "RESTARTING",
		Closes: true, Ending: EndsWithRecovery,
		Act: actRestore,
	})
}

// actRestore opens the restore's own window (down until ready) and
// returns; the restart goes on in the background.
func actRestore(f *Fire) error {
	env := f.Env
	f.Enter()
	env.Record(ActionRestore, 0, f.By, nil)
	env.OpenWindow(time.Now(), true)
	env.Go(func() {
		readyAt, err := f.Target.Restore(env.Context())
		restarted(f, "restore", readyAt, err)
	})
	return nil
}
