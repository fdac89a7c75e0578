package fault_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/fault"
)

// clockTarget is a Target that records, on the bubble's fake clock, when it
// was stopped and continued: a stall's timing is the fault package's, not
// the machine's.
type clockTarget struct {
	mu                 sync.Mutex
	stopped, continued []time.Time
}

func (*clockTarget) Name() string { return "source-0" }
func (c *clockTarget) Stop(context.Context) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.stopped = append(c.stopped, now)
	return now, nil
}
func (c *clockTarget) Continue(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.continued = append(c.continued, time.Now())
	return nil
}
func (*clockTarget) Kill(context.Context, func(time.Time, error)) (time.Time, error) {
	return time.Time{}, errors.New("not here")
}
func (*clockTarget) Terminate(context.Context, func(time.Time, error)) error {
	return errors.New("not here")
}
func (*clockTarget) Restore(context.Context) (time.Time, error) {
	return time.Time{}, errors.New("not here")
}

// TestStallLastsExactlyItsDuration: a stall for d continues its target d
// after it stopped it, once, with no one named as asking; on the fake
// clock the figure is exact. (TestStallResumesByItselfAfterItsDuration
// does it to real processes.)
func TestStallLastsExactlyItsDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 300 * time.Millisecond
		tg := &clockTarget{}
		st, err := fault.Stall(context.Background(), tg, d)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(d - time.Nanosecond)
		synctest.Wait()
		select {
		case <-st.Done():
			t.Fatalf("resumed at %v, before its %v", st.ResumedAt().Sub(st.StoppedAt()), d)
		default:
		}
		<-st.Done()
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if got := st.ResumedAt().Sub(st.StoppedAt()); got != d || st.ResumedBy() != "" {
			t.Errorf("stall lasted %v, resumed by %q; want %v, by its own timer", got, st.ResumedBy(), d)
		}
		tg.mu.Lock()
		defer tg.mu.Unlock()
		if len(tg.stopped) != 1 || len(tg.continued) != 1 || tg.continued[0].Sub(tg.stopped[0]) != d {
			t.Errorf("target stopped at %v and continued at %v, want once each, %v apart", tg.stopped, tg.continued, d)
		}
	})
}
