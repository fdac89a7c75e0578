package owner

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestAnOwnerIsItsPidAndStartTime: this process is alive as itself and
// not with another start time; a tag reads back only when it is exactly
// PID.TICKS.NS (or PID.TICKS, its namespace not known).
func TestAnOwnerIsItsPidAndStartTime(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if !self.Alive() {
		t.Errorf("%v: not alive", self)
	}
	other := self
	other.StartTicks++
	if other.Alive() || !other.Gone() {
		t.Errorf("%v: alive or not gone, but its start time is not this process's", other)
	}
	if self.NS == 0 || self.Gone() {
		t.Errorf("%v: no PID namespace, or gone", self)
	}
	// An owner of another PID namespace (a container's, seen from its
	// host, or the host's seen from a container) is never gone: its pid
	// names another process here, or none, and a sweep must leave it be.
	for _, elsewhere := range []ID{{Pid: other.Pid, StartTicks: other.StartTicks, NS: self.NS + 1}, {Pid: other.Pid, StartTicks: other.StartTicks}} {
		if elsewhere.Gone() || elsewhere.Here() {
			t.Errorf("%v (namespace %d, this one %d): gone or here", elsewhere, elsewhere.NS, self.NS)
		}
	}
	if got, ok := ParseTag(self.Tag()); !ok || got != self {
		t.Errorf("ParseTag(%q) = %v, %v", self.Tag(), got, ok)
	}
	for _, bad := range []string{"", "12", "12.", ".5", "012.5", "12.05", "-1.5", "12.5.0", "12.5.06", "12.5.x", "12.5.6.7", "a.5", "0.5"} {
		if got, ok := ParseTag(bad); ok {
			t.Errorf("ParseTag(%q) = %v, want none", bad, got)
		}
	}
}

// TestMarkedReadsTheEnvironmentAProcessStartedWith: a child started with
// the mark names its owner (the first mark, as getenv reads it); one
// without names none.
func TestMarkedReadsTheEnvironmentAProcessStartedWith(t *testing.T) {
	o := ID{Pid: 4242, StartTicks: 77}
	for _, tt := range []struct {
		env  []string
		want ID
		ok   bool
	}{
		{[]string{"A=1", o.EnvVar(), "B=2"}, o, true},
		{[]string{"A=1"}, ID{}, false},
		{[]string{Env + "=nonsense"}, ID{}, false},
	} {
		cmd := exec.Command("sleep", "60")
		cmd.Env = tt.env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pastExec(t, cmd.Process.Pid)
		got, ok := Marked(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if got != tt.want || ok != tt.ok {
			t.Errorf("env %q: Marked = %v, %v; want %v, %v", tt.env, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := Marked(os.Getpid()); ok && os.Getenv(Env) == "" {
		t.Errorf("this process is marked without %s in its environment", Env)
	}
}

// pastExec waits until pid's new program has its arguments and
// environment in place: Start returns once execve is past its point of no
// return, but the kernel sets them up a moment later (until then
// /proc/PID/environ and cmdline read empty), which CI once caught.
func pastExec(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && len(b) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d has no command line 10 s after its start", pid)
		}
		time.Sleep(time.Millisecond)
	}
}
