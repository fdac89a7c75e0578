// Package raceguard keeps the race detector from crashing inside
// testing/synctest bubbles on the Go releases that have the bug.
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
// suite on go1.26.8; a 30-line test of bubbled timers (this package's test)
// meets it on every run there, and on go1.26.11 too, and never on go1.27.0
// or go1.27.4.
//
// With one P only one thread runs Go code at a time, so the bubble's timers
// never run concurrently. The guard sets GOMAXPROCS to 1 in a race-enabled
// test binary on a Go older than 1.27, and does nothing otherwise. It costs
// little here: the packages' tests that use bubbles run one at a time (no
// t.Parallel), `go test -p 2` keeps both cores busy with two packages, and
// the engines a test starts as processes keep their own GOMAXPROCS.
package raceguard

import (
	"go/version"
	"runtime"
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

// Apply limits the process to one P when this binary needs the guard, and
// says whether it did.
func Apply() bool {
	if !Needed(runtime.Version(), raceEnabled) {
		return false
	}
	runtime.GOMAXPROCS(1)
	return true
}

// Runner is what a TestMain runs: *testing.M, and what testscript.Main takes.
type Runner interface{ Run() int }

type guarded struct{ m Runner }

func (g guarded) Run() int {
	Apply()
	return g.m.Run()
}

// Wrap is m with the guard applied when m runs the tests, and not before:
// a test binary that serves as an engine or a testscript command (a child
// process) keeps every core. Every package whose tests use testing/synctest
// runs its tests through it (TestEveryBubbledPackageIsGuarded).
func Wrap(m Runner) Runner { return guarded{m} }
