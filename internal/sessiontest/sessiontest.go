// Package sessiontest holds what tests of several packages read of a
// process through package session.
package sessiontest

import (
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"p2pfault/runner/session"
)

// State is pid's /proc state letter ('T' stopped, 'S' sleeping, ...); it
// fails the test when pid cannot be read.
func State(t testing.TB, pid int) byte {
	t.Helper()
	st, err := session.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.State
}

// States is the state letters of session sid's live members, as ps shows
// them ("SS" running, "TT" stopped), in /proc's order; it fails the test
// when the session cannot be read.
func States(t testing.TB, sid int) string {
	t.Helper()
	ms, err := session.Members(sid)
	if err != nil {
		t.Fatal(err)
	}
	var s []byte
	for _, p := range ms {
		if p.Live() {
			s = append(s, p.State)
		}
	}
	return string(s)
}

// Sleeper starts `sleep seconds` as the leader of a session of its own, a
// process p2pfault did not start for a test to record, stop or plant, and
// returns its pid. The session is killed and the process reaped when t
// ends, also when it fails.
func Sleeper(t testing.TB, seconds int) int {
	t.Helper()
	cmd := exec.Command("sleep", strconv.Itoa(seconds))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	reaped := make(chan struct{})
	go func() { _ = cmd.Wait(); close(reaped) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-reaped
	})
	return pid
}
