package netfault

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary act as a child process of these tests
// (see TestMain) instead of running them.
const childEnv = "P2PFAULT_NETFAULT_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "check":
		os.Exit(childCheck())
	case "hold":
		os.Exit(childHold())
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childEnv, os.Getenv(childEnv))
		os.Exit(2)
	}
}

// childCheck is a run's start-up as the CLI will do it: check, and exit 2
// with the message on a setup error. It also lists tables, to show the
// kernel's own refusal is reported the same way.
func childCheck() int {
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "CapEff:") {
			fmt.Println(l)
		}
	}
	_, lerr := Tables()
	fmt.Println("tables:", lerr)
	if err := Check("partition"); err != nil {
		var se *SetupError
		fmt.Println("setup error:", errors.As(err, &se))
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// childHold creates a table, partitions a port, says so and waits to be
// killed: a p2pfault that is SIGKILLed mid-fault.
func childHold() int {
	port, err := strconv.Atoi(os.Getenv("P2PFAULT_NETFAULT_PORT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad port:", err)
		return 2
	}
	f, err := New(os.Getenv("P2PFAULT_NETFAULT_RUN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := f.Partition("source-0", port); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("ready", f.Table())
	time.Sleep(time.Minute) // the test kills it long before
	return 1
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

func TestCheckWithoutCapabilities(t *testing.T) {
	pre := dropCaps(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pre[0], append(pre[1:], exe, "-test.run=^$")...)
	cmd.Env = append(os.Environ(), childEnv+"=check")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("child: %v, want exit 2\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	t.Logf("child stdout:\n%s\nchild stderr: %s", out, stderr.String())
	if !strings.Contains(string(out), "CapEff:\t0000000000000000") {
		t.Fatalf("child's effective capability set is not empty:\n%s", out)
	}
	want := "partition needs CAP_NET_ADMIN: run as root or grant it with setcap cap_net_admin+ep " + exe + "\n"
	if stderr.String() != want {
		t.Errorf("child's message:\n%q\nwant\n%q", stderr.String(), want)
	}
	if !strings.Contains(string(out), "setup error: true") {
		t.Errorf("Check's error is not a *SetupError:\n%s", out)
	}
	// The kernel's own EPERM, as a table listing gets it, is reported the
	// same way.
	if !strings.Contains(string(out), "tables: list firewall tables needs CAP_NET_ADMIN: run as root or grant it with setcap cap_net_admin+ep") {
		t.Errorf("the kernel's refusal was not reported as missing CAP_NET_ADMIN:\n%s", out)
	}
}

// A p2pfault SIGKILLed mid-partition cannot delete its table: the table
// stays, still dropping, until DeleteTable removes it by the recorded name.
func TestSIGKILLLeavesTheTableAndDeleteTableRemovesIt(t *testing.T) {
	needRights(t)
	target, port := listener(t, "tcp4", "127.0.0.1:0")
	run := runID(t, "")
	name := TableName(run)
	t.Cleanup(func() { _, _ = DeleteTable(name) }) // also when the test fails
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=hold", "P2PFAULT_NETFAULT_RUN="+run, "P2PFAULT_NETFAULT_PORT="+strconv.Itoa(port))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when the child is reaped
	lines := make(chan string, 8)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("child %d did not exit after SIGKILL", cmd.Process.Pid)
		}
	})
	select {
	case l, ok := <-lines:
		if !ok || l != "ready "+name {
			t.Fatalf("child said %q (open %v), want %q; stderr: %s", l, ok, "ready "+name, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("child not ready after 20s; stderr: %s", stderr.String())
	}
	mustHang(t, target)

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("child did not exit after SIGKILL")
	}
	names, err := Tables()
	if err != nil || !slices.Contains(names, name) {
		t.Fatalf("after SIGKILL, Tables() = %v, %v; want the leftover %s", names, err, name)
	}
	mustHang(t, target) // the leftover still partitions

	deleted, err := DeleteTable(name)
	if err != nil || !deleted {
		t.Fatalf("DeleteTable(%s) = %v, %v; want true, nil", name, deleted, err)
	}
	names, err = Tables()
	if err != nil || slices.Contains(names, name) {
		t.Fatalf("after DeleteTable, Tables() = %v, %v; want %s gone", names, err, name)
	}
	mustComplete(t, target)
	if deleted, err := DeleteTable(name); err != nil || deleted {
		t.Errorf("second DeleteTable = %v, %v; want false, nil", deleted, err)
	}
}
