package runner

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/runner/session"
)

// TestARefusedSessionIsRefusedOnce: ending a session that must never be
// signalled (p2pfault's own, as a planted sessions.json may name) is one
// refusal, not one per signal of the sequence (SIGTERM then SIGCONT; SIGKILL
// then more), which printed the same line twice.
func TestARefusedSessionIsRefusedOnce(t *testing.T) {
	own, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	refusal := session.Guard(own) // in a PID namespace the session reads 0: the system's
	if refusal == nil {
		t.Fatalf("session.Guard(%d) (this process's own session) = nil, want a refusal", own)
	}
	told := 0
	ends := []struct {
		name string
		end  EndFunc
	}{
		{"terminate (SIGTERM, SIGCONT)", terminate},
		{"signal (SIGKILL, then SIGCONT)", signal(unix.SIGKILL, func(time.Time, error) { told++ }, unix.SIGCONT)},
	}
	for _, e := range ends {
		err := e.end(own)
		if err == nil {
			t.Fatalf("%s of the own session %d: no error", e.name, own)
		}
		if n := strings.Count(err.Error(), refusal.Error()); n != 1 {
			t.Errorf("%s of the own session: %q says the refusal %d times, want once", e.name, err, n)
		}
	}
	if told != 1 {
		t.Errorf("signalled was told %d times, want once", told)
	}
}
