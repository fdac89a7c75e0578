package enginetest

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartSession starts `sh` in a session of its own with a background
// child, so the session has two members (the leader and the child): a
// bystander that faults must not touch, or a target for signalling tests.
// It is killed by its process group (= its session id) in t.Cleanup and
// reaped. It returns the session id.
func StartSession(t testing.TB) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 120 & exec sleep 120")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sid := cmd.Process.Pid
	reaped := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(reaped)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
		<-reaped
	})
	// The leader lists its background child once sh has forked it.
	children := "/proc/" + strconv.Itoa(sid) + "/task/" + strconv.Itoa(sid) + "/children"
	if !Eventually(5*time.Second, func() bool {
		b, err := os.ReadFile(children)
		return err == nil && strings.TrimSpace(string(b)) != ""
	}) {
		t.Fatalf("session %d never had its second process", sid)
	}
	return sid
}
