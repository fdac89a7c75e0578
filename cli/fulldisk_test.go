package cli_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/report"
)

// smallDisk mounts a tmpfs of size bytes in a temporary folder, unmounted
// when the test ends (also when it fails), and returns it; the test is
// skipped, saying why, when it cannot be (not root, no mount rights).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a full disk is a tmpfs mounted for the test: needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mount a %s tmpfs on %s: %v", size, dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			_ = unix.Unmount(dir, unix.MNT_DETACH) // a process of the test still holds a file
		}
	})
	return dir
}

// fillDisk writes zeros to dir until its file system is full.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Errorf("fill %s: %v", dir, err)
		return
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("fill %s: %v", dir, err)
			}
			return
		}
	}
}

// TestAFullDiskStopsTheRunAtOnce: the first write of the events log that
// fails (the disk filled in the middle of a stall) stops the run at once
// with exit 2, naming the file and the error, where it went on to its
// planned end and only then failed; the events written before the disk
// filled still read back. On the virtual cluster, so that "at once" is
// measured on the bubble's clock; plain and compressed logs alike, and a
// slice's rows (every row stops: they share the disk).
func TestAFullDiskStopsTheRunAtOnce(t *testing.T) {
	t.Parallel()                    // shares nothing (main_test.go: parallel tests)
	const fillAt = 30 * time.Second // warm-up, then the stall at 10 s of a 65 s run
	for _, tt := range []struct {
		name string
		args []string
		file string // the log that fails, in --out
	}{
		{"plain", []string{"run", "--headless", "--case", "stall"}, "events.jsonl"},
		{"zstd", []string{"run", "--headless", "--case", "stall", "--events-compress", "zstd"}, "events.jsonl.zst"},
		{"slice", []string{"slice", "--arms", "main", "--cases", "stall"}, filepath.Join("main-stall", "events.jsonl")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			disk := smallDisk(t, "4m")
			out := filepath.Join(disk, "run")
			var r virtualRun
			var filledAt time.Duration
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				filled := make(chan struct{})
				go func() {
					defer close(filled)
					time.Sleep(fillAt)
					fillDisk(t, disk)
					filledAt = time.Since(start)
				}()
				r = runVirtual(t, append(tt.args, "--out", out)...)
				<-filled
			})
			if r.code != exitcode.Usage {
				t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			path := filepath.Join(out, tt.file)
			if want := "p2pfault: events log " + path + ": write: no space left on device: run stopped\n"; r.stderr != want {
				t.Errorf("stderr %q, want %q", r.stderr, want)
			}
			// The run's planned end is its warm-up and 65 s after it. The
			// first write that fails is the first that needs a new page:
			// the log's last page still takes what fits (a compressed
			// log's few KB take some seconds of events). Then the stop is
			// the run's cancellation: the stall resumed, the engines
			// stopped, within a second of the bubble's clock.
			if r.took < filledAt || r.took > filledAt+15*time.Second {
				t.Errorf("the run ended %v in, the disk filled %v in: want it stopped within 15 s, long before its end", r.took, filledAt)
			}
			t.Logf("stopped %v after the disk filled (bubble clock)", r.took-filledAt)
			if strings.Contains(r.stdout, "faulted source p50") {
				t.Errorf("a run stopped by its log printed a verdict table:\n%s", r.stdout)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			events, truncated, err := report.ReadEvents(f)
			if err != nil || !truncated || len(events) == 0 {
				t.Errorf("events before the disk filled: %d, truncated %v, error %v; want some, cut short, no error", len(events), truncated, err)
			}
		})
	}
}

// TestAFullDiskUndoesTheHostState: on real engines, a disk that fills
// during a stall stops the run long before its planned end (a 30 s stall
// and its recovery still to come), with exit 2 naming the events log, and
// no engine is left alive, stopped or not.
func TestAFullDiskUndoesTheHostState(t *testing.T) {
	disk := smallDisk(t, "8m")
	out := filepath.Join(disk, "run")
	cmd, log := startP2pfault(t, "run", "--headless", "--case", "stall", "--time-scale", "0.25", "--stall-for", "120s",
		"--free-ports", "--engine-arg=--sim-startup-delay=0s", "--out", out)
	pids := waitEngines(t, out, 3, 60*time.Second, log)
	waitEvent(t, out, "a fault event", 60*time.Second, func(ev event.Event) bool { return ev.Kind == event.KindFault })
	fillDisk(t, disk)
	filled := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("20 s after the disk filled (the stall had 30 s to go) p2pfault still runs\n%s", log.String())
	}
	took := time.Since(filled)
	if code := cmd.ProcessState.ExitCode(); code != exitcode.Usage {
		t.Fatalf("exit %d, want 2\n%s", code, log.String())
	}
	want := "p2pfault: events log " + filepath.Join(out, "events.jsonl") + ": write: no space left on device: run stopped"
	if !strings.Contains(log.String(), want) {
		t.Errorf("output does not say %q:\n%s", want, log.String())
	}
	if alive := alivePids(pids); len(alive) > 0 {
		t.Errorf("engine processes %v outlived the run", alive)
	}
	t.Logf("stopped %v after the disk filled", took.Round(time.Millisecond))
}
