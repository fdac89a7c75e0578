package raceguard_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"p2pfault/internal/raceguard"
)

func TestNeededOnlyWithTheRaceDetectorBeforeGo127(t *testing.T) {
	for _, c := range []struct {
		version string
		race    bool
		want    bool
	}{
		{"go1.26.8", true, true},
		{"go1.26.11", true, true},
		{"go1.25.3", true, true},
		{"go1.27.0", true, false},
		{"go1.27.4", true, false},
		{"go1.28rc1", true, false},
		{"go1.26.8", false, false},
	} {
		if got := raceguard.Needed(c.version, c.race); got != c.want {
			t.Errorf("Needed(%q, race=%v) = %v, want %v", c.version, c.race, got, c.want)
		}
	}
}

// TestABubbleRunsOnOnePWhenNeeded: inside raceguard.Test a binary that
// needs the guard has one P, two overlapping bubbles (parallel tests) keep
// it until both end, and the Ps come back after.
func TestABubbleRunsOnOnePWhenNeeded(t *testing.T) {
	needed := raceguard.Needed(runtime.Version(), raceOn)
	before := runtime.GOMAXPROCS(0)
	want := before
	if needed {
		want = 1
	}
	inside := make(chan struct{})
	release := make(chan struct{})
	var outer sync.WaitGroup
	outer.Go(func() {
		raceguard.Test(t, func(t *testing.T) {
			close(inside)
			<-release
			if got := runtime.GOMAXPROCS(0); got != want {
				t.Errorf("first bubble, after the second ended: GOMAXPROCS %d, want %d", got, want)
			}
		})
	})
	<-inside
	raceguard.Test(t, func(t *testing.T) {
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Errorf("%s race=%v, two bubbles: GOMAXPROCS %d, want %d", runtime.Version(), raceOn, got, want)
		}
	})
	close(release)
	outer.Wait()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("after the bubbles: GOMAXPROCS %d, want %d back", got, before)
	}
}

// TestBubbledTimersSurviveTheRaceDetector is golang/go#78156's workload:
// goroutines in a bubble that fire timers in place (AfterFunc(0), a channel
// timer read after its time) while the bubble's root runs the due ones. On
// go1.26.8 with -race and two Ps it faults on every run; under the guard it
// passes. Without -race it is an ordinary timer test.
func TestBubbledTimersSurviveTheRaceDetector(t *testing.T) {
	for range 20 {
		raceguard.Test(t, func(t *testing.T) {
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

// TestEveryBubbleStartsHere: no test outside this package calls
// synctest.Test or synctest.Run itself, so no bubble escapes the guard.
func TestEveryBubbleStartsHere(t *testing.T) {
	root, err := filepath.Abs("../..") // the module's root: this package is internal/raceguard
	if err != nil {
		t.Fatal(err)
	}
	through := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "raceguard" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		for _, call := range []string{"synctest.Test(", "synctest.Run("} {
			if strings.Contains(src, call) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s calls %s itself; start the bubble with raceguard.Test", rel, call)
			}
		}
		through += strings.Count(src, "raceguard.Test(")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if through < 10 {
		t.Fatalf("found %d bubbles started with raceguard.Test under %s; the walk is looking in the wrong place", through, root)
	}
}
