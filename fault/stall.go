package fault

import (
	"context"
	"fmt"
	"sync"
	"time"

	"p2pfault/event"
)

// ActionStall stops a source's processes (SIGSTOP) for a duration, or
// until resume.
const ActionStall = "stall"

func init() {
	Register(&Kind{
		Ranks: RankAlone,
		Name:  ActionStall, Key: "s", Help: "stall", LongHelp: "stall (SIGSTOP)", Order: 10,
		TakesFor: true, Needs: event.CondUp, Leaves: event.CondStalled, Badge: "STALLED",
		Opens: true, Ending: EndsAfterFor, Case: SeedCase,
		Act: actStall, Verify: verifyStall,
	})
}

// actStall stops the target; it resumes by itself after For (0: on
// resume), and at once when the run's context ends: a stall never
// outlives its run.
func actStall(f *Fire) error {
	env := f.Env
	st, err := Stall(env.Context(), f.Target, f.For)
	if err != nil {
		env.Record(ActionStall, f.For, f.By, err)
		return err
	}
	env.Hold(st)
	f.Enter()
	env.Record(ActionStall, f.For, f.By, nil)
	env.OpenWindow(st.StoppedAt(), true)
	env.Changed()
	env.Go(func() {
		// The window closes when the target runs again, by the timer
		// or by resume.
		<-st.Done()
		env.Hold(nil)
		f.Lift()
		by := f.By
		if rb := st.ResumedBy(); rb != "" {
			by = rb
		}
		env.Record(ActionResume, 0, by, st.Err())
		env.CloseWindow(st.ResumedAt())
		env.Changed()
		if st.ResumedBy() == "" && st.Err() == nil && env.Context().Err() == nil {
			// Resumed by its timer: no resume kind fired to verify it.
			env.Verified(ActionResume, verifyResume(f))
		}
	})
	return nil
}

// Stalled is a stalled target: every process stopped.
type Stalled struct {
	target    Target
	ctx       context.Context // for the resume: never cancelled
	stoppedAt time.Time

	once      sync.Once
	done      chan struct{}
	resumedAt time.Time
	resumedBy string
	err       error
}

// Stall stops every process of t and returns once all show stopped. With
// d > 0 it resumes them by itself after d; with d == 0 they stay stopped
// until ResumeBy. When ctx ends first the target is resumed at once.
func Stall(ctx context.Context, t Target, d time.Duration) (*Stalled, error) {
	if d < 0 {
		return nil, fmt.Errorf("stall %s: negative duration %v", t.Name(), d)
	}
	at, err := t.Stop(ctx)
	if err != nil {
		return nil, fmt.Errorf("stall %s: %w", t.Name(), err)
	}
	// The resume must happen however the run ends: its context is the
	// run's values without its cancellation.
	s := &Stalled{target: t, ctx: context.WithoutCancel(ctx), stoppedAt: at, done: make(chan struct{})}
	go undoLater(ctx, s.stoppedAt, d, s.done, s.resume)
	return s, nil
}

// undoLater undoes a fault that began at from (a stall's resume, a cut's
// heal) d after it began (d == 0: never by itself) or when ctx ends, with
// undo("") (asked for by no one: its timer or the run's end), and returns
// once it is undone: at once when done closes first (undone already, by a
// key or a step). The error undo returns is the fault's, kept for its end
// event.
func undoLater(ctx context.Context, from time.Time, d time.Duration, done <-chan struct{}, undo func(by string) error) {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d - time.Since(from))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
	case <-ctx.Done():
	case <-done:
		return
	}
	undo("")
}

// ResumeBy continues the target now (if it was not resumed already),
// asked for by someone ("key", "script"; "" for the stall's own timer), and
// returns once it runs again: the resume event names who asked.
func (s *Stalled) ResumeBy(by string) error { return s.resume(by) }

func (s *Stalled) resume(by string) error {
	s.once.Do(func() {
		at := time.Now()
		err := s.target.Continue(s.ctx)
		if err != nil {
			err = fmt.Errorf("resume %s: %w", s.target.Name(), err)
		}
		s.resumedAt, s.resumedBy, s.err = at, by, err
		close(s.done)
	})
	<-s.done
	return s.err
}

// StoppedAt is when SIGSTOP was sent: the fault window opens.
func (s *Stalled) StoppedAt() time.Time { return s.stoppedAt }

// Done is closed once the target has been resumed.
func (s *Stalled) Done() <-chan struct{} { return s.done }

// ResumedAt is when the resume was sent (the stall's fault window closes),
// zero before Done is closed.
func (s *Stalled) ResumedAt() time.Time {
	select {
	case <-s.done:
		return s.resumedAt
	default:
		return time.Time{}
	}
}

// ResumedBy is who asked for the resume, "" for the timer or the run's end.
func (s *Stalled) ResumedBy() string {
	select {
	case <-s.done:
		return s.resumedBy
	default:
		return ""
	}
}

// Err is the resume's error, nil before Done is closed.
func (s *Stalled) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}
