// Package raceguard runs testing/synctest bubbles so that the race detector
// does not crash inside them on the Go releases that have the bug.
//
// Before Go 1.27 the runtime runs every timer of a synctest bubble on one
// race-detector context, the bubble's (runtime/time.go, unlockAndRun), but
// two threads can run such timers at once: the bubble's root goroutine runs
// the due timers when the bubble goes idle, while a goroutine the previous
// timer woke, on another P, fires a timer of its own in place (a timer reset
// to "now", a channel timer read after its time passed: maybeRunChan). The
// race runtime's per-thread state is then used by two threads at once, and
// sooner or later it faults (SIGSEGV in StackDepotBase::Put, or a failed
// CHECK; golang/go#78156). p2pfault's CI met it once in seven runs of the
// suite on go1.26.8; a 30-line test of bubbled timers (TestBubbledTimersSurviveTheRaceDetector)
// meets it on every run there, and on go1.26.11 too, and never on go1.27.0
// or go1.27.4.
//
// With one P only one thread runs Go code at a time, so the bubble's timers
// never run concurrently. Test runs a bubble on one P in a race-enabled
// binary built by a Go older than 1.27, and is synctest.Test otherwise. The
// limit holds only while a bubble runs: the real-process tests of the same
// package keep both cores, and so do the engines a test starts as processes.
// It costs little: a bubble's goroutines mostly take turns on the fake clock.
package raceguard

import (
	"go/version"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
)

// fixedIn is the first Go release whose race runtime survives bubbled
// timers run on two threads (measured: go1.27.0 and go1.27.4 pass, go1.26.8
// and go1.26.11 fail).
const fixedIn = "go1.27"

// Needed says whether a binary built by goVersion, race detector on or off,
// needs the guard.
func Needed(goVersion string, race bool) bool {
	return race && version.Compare(goVersion, fixedIn) < 0
}

var needed = Needed(runtime.Version(), raceEnabled)

// procs counts the bubbles running under the guard: the first sets one P,
// the last gives the process back the Ps it had (tests run in parallel may
// overlap their bubbles).
var procs struct {
	sync.Mutex
	bubbles int
	saved   int
}

func limit() {
	procs.Lock()
	defer procs.Unlock()
	if procs.bubbles == 0 {
		procs.saved = runtime.GOMAXPROCS(1)
	}
	procs.bubbles++
}

func unlimit() {
	procs.Lock()
	defer procs.Unlock()
	procs.bubbles--
	if procs.bubbles == 0 {
		runtime.GOMAXPROCS(procs.saved)
	}
}

// Test is synctest.Test, on one P while the bubble runs when this binary
// needs the guard. Every bubble of p2pfault's tests starts here
// (TestEveryBubbleStartsHere).
func Test(t *testing.T, f func(*testing.T)) {
	t.Helper()
	if needed {
		limit()
		defer unlimit()
	}
	synctest.Test(t, f)
}
