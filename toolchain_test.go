package main

import (
	"go/version"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// raceFixedIn is the first Go release whose race detector survives a
// synctest bubble's timers run on two threads (golang/go#78156: before it,
// the runtime ran every timer of a bubble under the bubble's one race
// context, while the bubble's root and a goroutine on another P could each
// run one; the race runtime's per-thread state, used by two threads at
// once, faulted: SIGSEGV in StackDepotBase::Put. Measured: go1.26.8 and
// go1.26.11 crash in TestBubbledTimersSurviveTheRaceDetector (3 runs of
// 4 on go1.26.8 here), go1.27.0, go1.27.3 and go1.27.4 never did).
const raceFixedIn = "go1.27"

// TestTheRaceDetectorSurvivesBubbles: a -race build by a Go older than
// 1.27 fails here, saying how to get p2pfault's Go, rather than crashing at
// random in another package's bubble.
func TestTheRaceDetectorSurvivesBubbles(t *testing.T) {
	if raceOn && version.Compare(runtime.Version(), raceFixedIn) < 0 {
		t.Fatalf("%s's race detector crashes in synctest bubbles (golang/go#78156), where p2pfault's verdict tests run: export GOTOOLCHAIN=go1.27.3 (README)", runtime.Version())
	}
}

// TestBubbledTimersSurviveTheRaceDetector is golang/go#78156's workload:
// goroutines in a bubble that fire timers in place (AfterFunc(0), a channel
// timer read after its time) while the bubble's root runs the due ones. On
// go1.26.8 with -race and two Ps it faults in most runs. Without -race it
// is an ordinary timer test.
func TestBubbledTimersSurviveTheRaceDetector(t *testing.T) {
	if raceOn && version.Compare(runtime.Version(), raceFixedIn) < 0 {
		t.Skipf("it would crash this %s binary; TestTheRaceDetectorSurvivesBubbles says why", runtime.Version())
	}
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			var wg sync.WaitGroup
			fired := make([]int, 8)
			for g := range fired {
				wg.Go(func() {
					for k := range 100 {
						tm := time.NewTimer(time.Millisecond)
						time.Sleep(time.Duration(k%3) * time.Millisecond)
						select {
						case <-tm.C:
						default:
						}
						done := make(chan struct{})
						time.AfterFunc(0, func() { close(done) })
						<-done
						fired[g]++
					}
				})
			}
			wg.Wait()
			for g, n := range fired {
				if n != 100 {
					t.Fatalf("goroutine %d fired %d AfterFuncs, want 100", g, n)
				}
			}
		})
	}
}
