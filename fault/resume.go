package fault

import (
	"fmt"

	"p2pfault/event"
)

// ActionResume continues a stalled source now.
const ActionResume = "resume"

func init() {
	Register(&Kind{
		Ranks: RankAlone,
		Name:  ActionResume, Key: "c", Help: "resume", LongHelp: "resume early", Order: 20,
		Needs: event.CondStalled, Leaves: event.CondUp, Hint: "resume it",
		Closes: true, Ending: EndsWithRecovery,
		Act: actResume, Verify: verifyResume,
	})
}

// actResume ends the stall in force; the stall's own goroutine records
// the resume and closes the window.
func actResume(f *Fire) error {
	st, _ := f.Env.Held().(*Stalled)
	if st == nil {
		err := fmt.Errorf("cannot resume %s: it is not stalled", f.Target.Name())
		f.Env.Record(ActionResume, 0, f.By, err)
		return err
	}
	return st.ResumeBy(f.By)
}
