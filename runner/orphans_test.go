package runner_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/internal/enginetest"
	"p2pfault/netfault"
	"p2pfault/owner"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

// TestLaunchedEnginesCarryTheirOwner: every process of every engine a
// cluster launches has this p2pfault's pid and start time in its
// environment, so ScanOwned lists each engine's session as this
// process's, whose owner runs.
func TestLaunchedEnginesCarryTheirOwner(t *testing.T) {
	_, rec := startCluster(t, fakeConfig(t))
	self, err := owner.Self()
	if err != nil {
		t.Fatal(err)
	}
	all, _ := runner.ScanOwned(fakeTables{})
	for _, sid := range rec.allSids() {
		for _, pid := range liveMembers(t, sid) {
			if got, ok := owner.Marked(pid); !ok || got != self {
				t.Errorf("engine process %d (session %d) is marked %v, %v; want %v", pid, sid, got, ok, self)
			}
		}
		i := slices.IndexFunc(all, func(o runner.Owned) bool { return o.Sid == sid })
		if i < 0 || all[i].Owner != self || all[i].Gone {
			t.Errorf("ScanOwned does not list session %d as this live process's: %v", sid, all)
		}
	}
}

// fakeTables is a host firewall with the given tables; Delete records.
type fakeTables struct {
	names   []string
	deleted *[]string
}

func (f fakeTables) List() ([]string, error) { return f.names, nil }
func (f fakeTables) Delete(name string) (bool, error) {
	*f.deleted = append(*f.deleted, name)
	return true, nil
}
func (f fakeTables) Owner(name string) (owner.ID, bool) { return netfault.TableOwner(name) }

// startMarked starts sh -c script in a session of its own with env added
// to its environment, killed by its session id when the test ends, and
// returns the session id once both its processes run.
func startMarked(t *testing.T, script string, env ...string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sid := cmd.Process.Pid
	reaped := make(chan struct{})
	go func() { _ = cmd.Wait(); close(reaped) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
		<-reaped
	})
	// Both processes past their exec into sleep: until the kernel has set
	// a new program's environment up, /proc/PID/environ reads empty, and
	// the scan would take the process for one without a mark.
	asleep := func() bool {
		live, _ := session.Live(sid)
		for _, pid := range live {
			if argv, _ := session.Cmdline(pid); len(argv) == 0 || argv[0] != "sleep" {
				return false
			}
		}
		return len(live) == 2
	}
	if !enginetest.Eventually(5*time.Second, asleep) {
		t.Fatalf("session %d never had its two processes asleep", sid)
	}
	return sid
}

// TestCleanupOrphansEndsOnlyWhatADeadOwnerLeft: of the sessions whose
// every process is marked by a p2pfault that is gone (this pid with
// another start time) cleanup ends each, and deletes each table whose name
// says the same; a live owner's session and table, a session with one
// process not marked, an unmarked session and a table naming no owner are
// left as they are.
func TestCleanupOrphansEndsOnlyWhatADeadOwnerLeft(t *testing.T) {
	self, err := owner.Self()
	if err != nil {
		t.Fatal(err)
	}
	dead := self
	dead.StartTicks++
	elsewhere := dead // the same pid and start time, in another PID namespace
	elsewhere.NS++
	two := "sleep 120 & exec sleep 120"
	orphan := startMarked(t, two, dead.EnvVar())
	kept := map[string]int{
		"a live owner's session":       startMarked(t, two, self.EnvVar()),
		"a session with one unmarked":  startMarked(t, "env -u "+owner.Env+" sleep 120 & exec sleep 120", dead.EnvVar()),
		"a session marked by no owner": startMarked(t, two),
		"another PID namespace's":      startMarked(t, two, elsewhere.EnvVar()),
	}
	deadTable := "p2pfault_main-partition-" + dead.Tag() + "-abcdef"
	var deleted []string
	host := fakeTables{names: []string{deadTable, "p2pfault_main-partition-" + self.Tag() + "-abcdef", "p2pfault_main-partition-" + elsewhere.Tag() + "-abcdef", "p2pfault_main-partition-15686-160a31"}, deleted: &deleted}

	var out bytes.Buffer
	n, err := runner.CleanupOrphans(context.Background(), host, &out)
	if err != nil || n < 1 {
		t.Fatalf("CleanupOrphans = %d, %v; want the orphan ended\n%s", n, err, out.String())
	}
	if live, _ := session.Live(orphan); len(live) != 0 {
		t.Errorf("the orphan session %d still has %v", orphan, live)
	}
	if want := fmt.Sprintf("engine session %d (sleep, pids ", orphan); !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	for what, sid := range kept {
		if live, _ := session.Live(sid); len(live) != 2 {
			t.Errorf("%s (%d) was touched: live %v", what, sid, live)
		}
	}
	if !slices.Equal(deleted, []string{deadTable}) {
		t.Errorf("deleted %q, want only %s", deleted, deadTable)
	}
	if want := "firewall table inet " + deadTable + " of p2pfault pid " + fmt.Sprint(self.Pid) + " (gone): deleted"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}
