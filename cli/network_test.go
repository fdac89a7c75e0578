package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/cli"
	"p2pfault/netfault"
)

// needNet skips a test that changes the kernel's firewall when this
// process cannot (CI runs as root, so there it runs).
func needNet(t *testing.T) {
	t.Helper()
	if err := netfault.Check("this test"); err != nil {
		t.Skipf("skipped: network faults need the firewall, which this process cannot change: %v", err)
	}
}

type tableRecord struct {
	Table  string   `json:"table"`
	Faults []string `json:"faults"`
}

// recordedTables reads the firewall tables the run's sessions.json names.
func recordedTables(t *testing.T, out string) []tableRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "sessions.json"))
	if err != nil {
		return nil
	}
	var f struct {
		Firewall []tableRecord `json:"firewall"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil
	}
	return f.Firewall
}

// startPartitioned starts `p2pfault run` with a partition of source-0 and
// waits until sessions.json records it in force and the table is in the
// kernel; it returns the table's name. The table is deleted at the end of
// the test in any case.
func startPartitioned(t *testing.T, out string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	cmd, log := startP2pfault(t, "run", "--headless", "--time-scale", "0.5", "--timeline", "at 1s partition source-0",
		"--free-ports", "--engine-arg=--sim-startup-delay=0s", "--out", out)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if recs := recordedTables(t, out); len(recs) == 1 && slices.Equal(recs[0].Faults, []string{"partition source-0"}) {
			table := recs[0].Table
			t.Cleanup(func() { _, _ = netfault.DeleteTable(table) })
			if names, _ := netfault.Tables(); slices.Contains(names, table) {
				return cmd, table, log
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no partition recorded in %s within a minute\n%s", out, log.String())
	return nil, "", nil
}

func assertTableGone(t *testing.T, table, when string) {
	t.Helper()
	names, err := netfault.Tables()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, table) {
		t.Errorf("%s, firewall table %s is still in the kernel", when, table)
	}
}

// TestSIGTERMDeletesTheTable: SIGTERM to p2pfault during a partition ends
// the run (interrupted) with the table deleted and unrecorded.
func TestSIGTERMDeletesTheTable(t *testing.T) {
	needNet(t)
	out := t.TempDir()
	cmd, table, log := startPartitioned(t, out)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("p2pfault after SIGTERM: %v, want exit 130 (interrupted)\n%s", err, log.String())
	}
	assertTableGone(t, table, "after SIGTERM")
	if recs := recordedTables(t, out); len(recs) != 0 {
		t.Errorf("sessions.json still names %v", recs)
	}
}

// TestSIGKILLLeavesATableThatCleanupDeletes: after a SIGKILL of p2pfault
// its table (and partition) stays in the kernel; a new run warns about it,
// and `p2pfault cleanup DIR` deletes it and says the partition is healed.
func TestSIGKILLLeavesATableThatCleanupDeletes(t *testing.T) {
	needNet(t)
	out := t.TempDir()
	cmd, table, _ := startPartitioned(t, out)
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if names, _ := netfault.Tables(); !slices.Contains(names, table) {
		t.Fatalf("table %s is gone after a SIGKILL of p2pfault: nothing for cleanup to show", table)
	}

	// A new run in that folder warns before it starts (a taken fixed port
	// then ends it before any engine starts).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var stdout, stderr bytes.Buffer
	code := cli.Main([]string{"run", "--headless", "--out", out, "--decoder-port", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)},
		strings.NewReader(""), &stdout, &stderr)
	if code != 2 {
		t.Fatalf("new run: exit %d, want 2 (port taken)\n%s", code, stderr.String())
	}
	warn := "warning: firewall table inet " + table + " of an earlier run in " + out +
		" is still in the kernel (partition source-0 in force); `p2pfault cleanup " + out + "` deletes it"
	if !strings.Contains(stderr.String(), warn) {
		t.Errorf("the new run's stderr lacks\n%s\ngot:\n%s", warn, stderr.String())
	}

	stdout.Reset()
	stderr.Reset()
	if code := cli.Main([]string{"cleanup", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("cleanup: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	t.Logf("cleanup said:\n%s", stdout.String())
	said := "firewall table inet " + table + ": deleted; partition source-0 healed by cleanup\n"
	if !strings.Contains(stdout.String(), said) {
		t.Errorf("cleanup's stdout lacks %q:\n%s", said, stdout.String())
	}
	assertTableGone(t, table, "after `p2pfault cleanup`")
	if recs := recordedTables(t, out); len(recs) != 0 {
		t.Errorf("sessions.json still names %v after cleanup", recs)
	}
	stdout.Reset()
	if code := cli.Main([]string{"cleanup", out}, strings.NewReader(""), &stdout, &stderr); code != 0 || strings.Contains(stdout.String(), "firewall") {
		t.Errorf("a second cleanup: exit %d, %s", code, stdout.String())
	}
}

// dropCaps is a command line that runs the rest with an empty capability
// set, even as root (the bounding set is emptied, so exec grants nothing).
func dropCaps(t *testing.T) []string {
	t.Helper()
	p, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("skipped: setpriv (util-linux) is not installed to start a child without capabilities")
	}
	return []string{p, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"}
}

// TestNetworkFaultsWithoutRightsAreASetupError: p2pfault with an empty
// capability set exits 2 at start for a run or slice that would partition
// or lose packets, naming what is missing, and makes no folder.
func TestNetworkFaultsWithoutRightsAreASetupError(t *testing.T) {
	pre := dropCaps(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"run --case partition", []string{"run", "--headless", "--case", "partition", "--free-ports"}, "partition"},
		{"run --timeline loss", []string{"run", "--headless", "--timeline", "at 1s loss 30% source-0 for 5s", "--free-ports"}, "loss"},
		{"slice --cases partition", []string{"slice", "--cases", "stall,partition", "--free-ports"}, "partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			cmd := exec.Command(pre[0], append(pre[1:], append([]string{exe}, append(tc.args, "--out", out)...)...)...)
			cmd.Env = append(os.Environ(), "P2PFAULT_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.Output()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("%v, want exit 2\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr.String())
			}
			want := "p2pfault: " + tc.want + " needs CAP_NET_ADMIN: run as root or grant it with setcap cap_net_admin+ep " + exe + "\n"
			if stderr.String() != want {
				t.Errorf("stderr:\n%q\nwant\n%q", stderr.String(), want)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused run made its folder %s (%v)", out, err)
			}
		})
	}
}
