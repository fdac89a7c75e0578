package probe

import (
	"strings"
	"testing"
	"time"
)

// TestLateTrialsAreCountedAndSaidOnceASecond: a trial sent under
// LateAfter after its slot is on time (no warning, no Sample.Late); one
// later is counted and said, with how late; more in the same second are
// counted and said with the next warning, not one line each.
func TestLateTrialsAreCountedAndSaidOnceASecond(t *testing.T) {
	var l lag
	var said []string
	warn := func(s string) { said = append(said, s) }
	l.note(LateAfter-time.Millisecond, warn)
	if len(said) != 0 || l.total != 0 || lateOf(LateAfter-time.Millisecond) != 0 {
		t.Fatalf("a trial on time was counted: %q, total %d", said, l.total)
	}
	l.note(300*time.Millisecond, warn)
	l.note(900*time.Millisecond, warn)
	if len(said) != 1 || !strings.Contains(said[0], "1 trial(s) sent up to 300ms late") || !strings.Contains(said[0], "p2pfault is behind") {
		t.Fatalf("warnings %q, want one for the first late trial", said)
	}
	if l.total != 2 || l.late != 1 || l.worst != 900*time.Millisecond {
		t.Errorf("total %d, pending %d (worst %s), want 2, 1 (900ms)", l.total, l.late, l.worst)
	}
	l.lastWarn = l.lastWarn.Add(-warnEvery)
	l.note(400*time.Millisecond, warn)
	if len(said) != 2 || !strings.Contains(said[1], "2 trial(s) sent up to 900ms late") || !strings.Contains(said[1], "(3 in all)") {
		t.Errorf("second warning %q", said)
	}
	if got := lateOf(time.Second); got != time.Second {
		t.Errorf("lateOf(1s) = %s", got)
	}
}
