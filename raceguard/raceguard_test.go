package raceguard_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/raceguard"
)

func TestMain(m *testing.M) { os.Exit(raceguard.Wrap(m).Run()) }

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

// TestTheGuardIsInForceWhenNeeded: TestMain went through Wrap, so a binary
// that needs the guard runs its tests on one P.
func TestTheGuardIsInForceWhenNeeded(t *testing.T) {
	needed := raceguard.Needed(runtime.Version(), raceOn)
	if got := runtime.GOMAXPROCS(0); needed && got != 1 {
		t.Fatalf("%s with race=%v: GOMAXPROCS %d, want 1", runtime.Version(), raceOn, got)
	}
}

// TestBubbledTimersSurviveTheRaceDetector is golang/go#78156's workload:
// goroutines in a bubble that fire timers in place (AfterFunc(0), a channel
// timer read after its time) while the bubble's root runs the due ones. On
// go1.26.8 with -race and two Ps it faults on every run; under the guard it
// passes. Without -race it is an ordinary timer test.
func TestBubbledTimersSurviveTheRaceDetector(t *testing.T) {
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

// TestEveryBubbledPackageIsGuarded: a package whose tests use
// testing/synctest runs them through raceguard.Wrap, so a new package
// cannot bring the crash back.
func TestEveryBubbledPackageIsGuarded(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bubbled := map[string]bool{}
	guarded := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		src := string(b)
		if strings.Contains(src, "synctest.Test(") || strings.Contains(src, "synctest.Run(") {
			bubbled[dir] = true
		}
		if strings.Contains(src, "raceguard.Wrap(") {
			guarded[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bubbled) < 2 {
		t.Fatalf("found bubbles in %d packages under %s; the walk is looking in the wrong place", len(bubbled), root)
	}
	for dir := range bubbled {
		if !guarded[dir] {
			t.Errorf("package %s uses testing/synctest but its TestMain does not run through raceguard.Wrap", dir)
		}
	}
}
