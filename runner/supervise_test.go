package runner_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/internal/enginetest"
)

// TestSupervisorKilledTakesEveryEngineDown ends a p2pfault (this test
// binary in supervise mode) in the middle of a run without Stop or any
// deferred code: SIGKILL, or a panic in a goroutine. Within 2 s no process
// of any of its engine sessions may be alive.
func TestSupervisorKilledTakesEveryEngineDown(t *testing.T) {
	tests := []struct{ engine, end string }{
		{"fake", "sigkill"},
		{"sim", "sigkill"},
		{"sim", "panic"},
	}
	for _, tt := range tests {
		t.Run(tt.engine+"/"+tt.end, func(t *testing.T) { testSupervisorKilled(t, tt.engine, tt.end) })
	}
}

func testSupervisorKilled(t *testing.T, engine, end string) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), superviseEnv+"="+dir, superviseEngineEnv+"="+engine, superviseEndEnv+"="+end, "GORACE=atexit_sleep_ms=0")
	// A session of its own, as p2pfault started from a shell; it dies with
	// the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	var sids []int
	t.Cleanup(func() { killSessions(sids) })

	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ready <- sc.Scan() && sc.Text() == "ready"
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("supervisor did not get ready: %s", stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("supervisor not ready after 60 s: %s", stderr.String())
	}
	// The record was written before "ready" and outlives its writer.
	rec := readSessions(t, dir)
	if len(rec.Engines) != 3 {
		t.Fatalf("sessions.json names %d engines, want 3", len(rec.Engines))
	}
	for _, e := range rec.Engines {
		sids = append(sids, e.Sid)
		if len(e.Members) != 2 {
			t.Fatalf("%s session %d recorded with members %v, want front end + core", e.Engine, e.Sid, e.Members)
		}
	}

	var died time.Time
	switch end {
	case "sigkill":
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		died = time.Now()
	case "panic":
		select {
		case <-exited:
			died = time.Now()
			if !strings.Contains(stderr.String(), "a goroutine panics mid-run") {
				t.Errorf("supervisor ended (%v) without the panic: %s", cmd.ProcessState, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("supervisor did not die of its panic")
		}
	}
	for _, e := range rec.Engines {
		if !enginetest.Eventually(2*time.Second-time.Since(died), func() bool { return len(liveMembers(t, e.Sid)) == 0 }) {
			t.Errorf("%s session %d still has %v %v after its p2pfault died", e.Engine, e.Sid, liveMembers(t, e.Sid), time.Since(died))
		}
	}
	t.Logf("every engine gone %v after the supervisor died", time.Since(died))
}
