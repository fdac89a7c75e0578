package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/internal/enginetest"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

func TestParseStatReadsIdentityFields(t *testing.T) {
	// tty .. itrealvalue, then starttime 98765, vsize, rss.
	tail := " 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10"
	tests := []struct {
		name    string
		line    string
		want    Proc
		wantErr string
	}{
		{"plain", "42 (sleep) S 1 42 42" + tail, Proc{Comm: "sleep", State: 'S', PPid: 1, Pgrp: 42, Sid: 42, StartTicks: 98765}, ""},
		{"comm with spaces and parens", "7 (a) b (c) T 3 7 9" + tail, Proc{Comm: "a) b (c", State: 'T', PPid: 3, Pgrp: 7, Sid: 9, StartTicks: 98765}, ""},
		{"no comm", "7 sleep S 1 2 3", Proc{}, "no (comm)"},
		{"truncated", "7 (x) S 1 2 3", Proc{}, "too few fields"},
		{"bad number", "7 (x) S one 2 3" + tail, Proc{}, "field 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.line))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestStatAgreesWithProcfs(t *testing.T) {
	self, err := procfs.Self()
	if err != nil {
		t.Fatal(err)
	}
	want, err := self.Stat()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got.Pid != want.PID || got.PPid != want.PPID || got.Sid != want.Session || got.Pgrp != want.PGRP || got.StartTicks != want.Starttime || got.Comm != want.Comm {
		t.Errorf("Stat = %+v, procfs = %+v", got, want)
	}
	if _, err := Stat(1 << 30); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stat of a pid that does not exist: %v, want ErrNotExist", err)
	}
}

func states(t *testing.T, sid int) string {
	t.Helper()
	ms, err := Members(sid)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range ms {
		b.WriteByte(m.State)
	}
	return b.String()
}

func TestSignalRefusesSystemSessions(t *testing.T) {
	tests := []struct {
		name string
		sid  int
		want string
	}{
		{"session 0", 0, "sessions 0 and 1 belong to the system"},
		{"session 1", 1, "sessions 0 and 1 belong to the system"},
		{"negative", -4, "refusing to signal session -4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// SIGCONT: harmless if the guard ever failed.
			_, err := Signal(tt.sid, unix.SIGCONT)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Signal(%d) = %v, want %q", tt.sid, err, tt.want)
			}
		})
	}
}

// ownSessionChild marks the re-executed test binary that checks the guard
// from inside a session of its own.
const ownSessionChild = "P2PFAULT_OWN_SESSION_CHILD"

// TestSignalRefusesOwnSession runs the check in a child started with
// Setsid: the test's own session id is whatever the caller's is, and in
// containers whose session leader lives outside the pid namespace getsid
// reads 0, which the system guard answers first. A fresh session always has
// a real id above 1, so the own-session guard is what must refuse it.
func TestSignalRefusesOwnSession(t *testing.T) {
	if os.Getenv(ownSessionChild) == "1" {
		own, err := unix.Getsid(0)
		if err != nil {
			t.Fatal(err)
		}
		if own != os.Getpid() {
			t.Fatalf("child is not a session leader: sid %d, pid %d", own, os.Getpid())
		}
		_, err = Signal(own, unix.SIGCONT)
		if err == nil || !strings.Contains(err.Error(), "p2pfault's own session") {
			t.Fatalf("Signal(own session %d) = %v, want \"p2pfault's own session\"", own, err)
		}
		fmt.Println("own-session guard refused", own)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalRefusesOwnSession$", "-test.v")
	cmd.Env = append(os.Environ(), ownSessionChild+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child in its own session: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "own-session guard refused") {
		t.Fatalf("child did not run the check:\n%s", out)
	}
}

func TestSignalStopsAndResumesEveryMemberOfExactlyThatSession(t *testing.T) {
	target := enginetest.StartSession(t)
	bystander := enginetest.StartSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	sent, err := Signal(target, unix.SIGSTOP)
	if err != nil || len(sent) != 2 {
		t.Fatalf("SIGSTOP sent to %v, %v; want both members", sent, err)
	}
	if err := WaitStates(ctx, sent, Proc.Stopped, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := states(t, target); got != "TT" {
		t.Errorf("target states %q after SIGSTOP, want TT", got)
	}
	if got := states(t, bystander); strings.ContainsRune(got, 'T') {
		t.Errorf("bystander states %q: touched", got)
	}
	if _, err := Signal(target, unix.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := WaitStates(ctx, sent, func(p Proc) bool { return !p.Stopped() }, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := Signal(target, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := WaitGone(ctx, target, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if live, _ := Live(bystander); len(live) != 2 {
		t.Errorf("bystander lost members: %v", live)
	}
	if _, err := Signal(target, unix.SIGCONT); !errors.Is(err, ErrNoMembers) {
		t.Errorf("signal to an empty session: %v, want ErrNoMembers", err)
	}
}

// Stop stalls a whole session and only it, refuses a session already
// stopped (a stall it did not make), and WaitContinued sees the SIGCONT.
func TestStopStallsTheWholeSessionOnce(t *testing.T) {
	target := enginetest.StartSession(t)
	bystander := enginetest.StartSession(t)
	ms, err := Members(target)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	at, pids, err := Stop(context.Background(), target, ms)
	if err != nil || len(pids) != 2 || at.Before(before) {
		t.Fatalf("Stop = %v, %v, %v; want both members stopped, sent after %v", at, pids, err, before)
	}
	if got := states(t, target); got != "TT" {
		t.Errorf("target states %q after Stop, want TT", got)
	}
	if got := states(t, bystander); strings.ContainsRune(got, 'T') {
		t.Errorf("bystander states %q: touched", got)
	}
	again, err := Members(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Stop(context.Background(), target, again); err == nil || !strings.Contains(err.Error(), "already stopped") {
		t.Errorf("Stop of a stopped session = %v, want it refused as already stopped", err)
	}
	sent, err := Signal(target, unix.SIGCONT)
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitContinued(context.Background(), sent); err != nil {
		t.Fatal(err)
	}
	if got := states(t, target); strings.ContainsRune(got, 'T') {
		t.Errorf("target states %q after SIGCONT, want none stopped", got)
	}
}
