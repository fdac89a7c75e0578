package fifo

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestAStuckConsumerHoldsUpNoPut: the consumer blocks on its first value;
// a thousand puts still return at once, and once it is let go it gets
// every value in order, then finish, then Done.
func TestAStuckConsumerHoldsUpNoPut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var got []int
		finished := false
		q := New(func(v int) {
			if v == 0 {
				<-release
			}
			got = append(got, v)
		}, func() { finished = true })
		for i := range 1000 {
			if !q.Put(i, 0) {
				t.Fatalf("Put(%d) refused on an open queue", i)
			}
		}
		q.Close()
		if q.Put(1000, 0) {
			t.Error("Put after Close was taken")
		}
		synctest.Wait()
		if len(got) != 0 || finished {
			t.Fatalf("delivered %d (finished %v) while the consumer was stuck on the first", len(got), finished)
		}
		close(release)
		<-q.Done()
		if len(got) != 1000 || !finished {
			t.Fatalf("delivered %d of 1000, finished %v", len(got), finished)
		}
		for i, v := range got {
			if v != i {
				t.Fatalf("value %d delivered at %d: out of order", v, i)
			}
		}
	})
}

// TestALimitDropsOnlyWhatWaitsPastIt: with a limit, a put past that many
// waiting values is refused; the ones taken are all delivered.
func TestALimitDropsOnlyWhatWaitsPastIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		n := 0
		q := New(func(v int) {
			if v == 0 {
				<-release
			}
			n++
		}, nil)
		q.Put(0, 3)
		synctest.Wait() // the consumer holds 0; the queue is empty
		taken := 0
		for i := 1; i <= 10; i++ {
			if q.Put(i, 3) {
				taken++
			}
		}
		if taken != 3 {
			t.Fatalf("took %d puts past a limit of 3 waiting", taken)
		}
		close(release)
		q.Close()
		<-q.Done()
		if n != 4 {
			t.Fatalf("delivered %d, want the first and the 3 taken", n)
		}
	})
}

// TestAQueueNeverPutOnLeavesNoGoroutine: no goroutine until the first Put
// or Close (a bubble would report it left blocked).
func TestAQueueNeverPutOnLeavesNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(func(int) {}, nil)
		time.Sleep(time.Second)
		select {
		case <-q.Done():
			t.Fatal("Done before Close")
		default:
		}
	})
}
