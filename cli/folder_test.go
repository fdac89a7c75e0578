package cli_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/cli"
	"p2pfault/netfault"
	"p2pfault/owner"
	"p2pfault/runfolder"
	"p2pfault/runner"
)

// blockSeconds makes, in ./p2pfault-runs, the default folders of a run of
// name started in each of the next few seconds, as runs of those seconds
// would have: a run started now then finds its planned name taken
// whichever second it starts in, so the test does not depend on two runs
// starting in one second to make them clash.
func blockSeconds(t *testing.T, name string) []string {
	t.Helper()
	now := time.Now()
	var made []string
	for s := range 20 {
		d := runfolder.Default(name, now.Add(time.Duration(s)*time.Second))
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		made = append(made, d)
	}
	return made
}

// runFolders lists ./p2pfault-runs but the folders in skip.
func runFolders(t *testing.T, skip []string) []string {
	t.Helper()
	var out []string
	for _, d := range runfolder.Runs() {
		if !slices.Contains(skip, d) {
			out = append(out, d)
		}
	}
	return out
}

// assertOneRunEach: each folder holds the events of exactly one run, and
// `p2pfault report` reads them.
func assertOneRunEach(t *testing.T, dirs []string) {
	t.Helper()
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, runfolder.Events))
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		if n := strings.Count(string(b), `"kind":"run"`); n != 1 {
			t.Errorf("%s/events.jsonl holds %d runs, want 1", d, n)
		}
		var stdout, stderr bytes.Buffer
		if code := cli.Main([]string{"report", d}, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Errorf("report %s: exit %d\n%s%s", d, code, stdout.String(), stderr.String())
		}
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != runfolder.DirMode {
			t.Errorf("%s: mode %v (%v), want %v", d, st.Mode().Perm(), err, os.FileMode(runfolder.DirMode))
		}
	}
}

// TestTwoVirtualRunsOfOneSecondGetTheirOwnFolders: two runs started
// together on the virtual cluster, on synctest's clock where both read the
// same instant, plan the same default folder; one gets it, the other the
// name with -2, each with only its own events and a readable report.
func TestTwoVirtualRunsOfOneSecondGetTheirOwnFolders(t *testing.T) {
	t.Chdir(t.TempDir())
	var runs [2]virtualRun
	synctest.Test(t, func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() { runs[i] = runVirtual(t, "run", "--headless", "--duration", "3s") })
		}
		wg.Wait()
	})
	for i, r := range runs {
		if r.code != 0 {
			t.Fatalf("run %d: exit %d\n%s%s", i, r.code, r.stdout, r.stderr)
		}
	}
	dirs := runFolders(t, nil)
	if len(dirs) != 2 || dirs[1] != dirs[0]+"-2" {
		t.Fatalf("folders %q, want NAME and NAME-2", dirs)
	}
	for _, d := range dirs {
		said := 0
		for _, r := range runs {
			if strings.Contains(r.stdout, "reports: "+d+"\n") {
				said++
			}
		}
		if said != 1 {
			t.Errorf("%d runs say they wrote %s, want 1", said, d)
		}
	}
	assertOneRunEach(t, dirs)
}

// TestTwoLaunchedRunsOfOneSecondGetTheirOwnFolders: the same with engines
// launched by two p2pfault processes started together.
func TestTwoLaunchedRunsOfOneSecondGetTheirOwnFolders(t *testing.T) {
	t.Chdir(t.TempDir())
	blocked := blockSeconds(t, "main-none")
	var cmds []*exec.Cmd
	var logs []*bytes.Buffer
	for range 2 {
		cmd, log := startP2pfault(t, "run", "--headless", "--engine", "sim", "--free-ports", "--duration", "2s",
			"--engine-arg=--sim-startup-delay=0s")
		cmds, logs = append(cmds, cmd), append(logs, log)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, logs[i].String())
		}
	}
	dirs := runFolders(t, blocked)
	if len(dirs) != 2 || dirs[0] == dirs[1] {
		t.Fatalf("folders %q besides the blocked ones, want two", dirs)
	}
	assertOneRunEach(t, dirs)
}

// TestALiveRunsFolderIsRefusedNamingItsPid: --out a folder a running
// p2pfault holds is exit 2 naming that p2pfault's pid, and nothing of the
// refused run is written there; once the holder is SIGKILLed (the kernel
// drops its lock) the folder is free again.
func TestALiveRunsFolderIsRefusedNamingItsPid(t *testing.T) {
	out := t.TempDir()
	holder, log := startP2pfault(t, "run", "--headless", "--engine", "virtual", "--duration", "1h", "--out", out)
	lock := filepath.Join(out, runfolder.LockFile)
	deadline := time.Now().Add(time.Minute)
	events := filepath.Join(out, runfolder.Events)
	for !strings.Contains(readFile(lock), `"pid":`+strconv.Itoa(holder.Process.Pid)) || !strings.Contains(readFile(events), `"kind":"run"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no lock of pid %d in %s within a minute\n%s", holder.Process.Pid, out, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := readFile(events)
	var stdout, stderr bytes.Buffer
	code := cli.Main([]string{"run", "--headless", "--engine", "virtual", "--duration", "1s", "--out", out}, strings.NewReader(""), &stdout, &stderr)
	want := "p2pfault: --out " + out + " is in use by p2pfault pid " + strconv.Itoa(holder.Process.Pid) + " (started "
	if code != 2 || !strings.HasPrefix(stderr.String(), want) {
		t.Fatalf("exit %d, stderr %q; want 2 and %q...", code, stderr.String(), want)
	}
	if after := readFile(events); !strings.HasPrefix(after, before) || strings.Count(after, `"kind":"run"`) != 1 {
		t.Errorf("the refused run wrote into the holder's events")
	}

	if err := syscall.Kill(holder.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	stdout.Reset()
	stderr.Reset()
	if code := cli.Main([]string{"run", "--headless", "--engine", "virtual", "--duration", "1s", "--out", out}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("after the holder's SIGKILL: exit %d, want 0\n%s", code, stderr.String())
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestOrphansOfTwoKilledPartitionRunsAreUndone: two partition runs
// started together get their own folders, each recording its own table;
// SIGKILLed mid-partition, both leave their table in the kernel, and
// `p2pfault cleanup --orphans`, reading no record, deletes both (each
// names its owner, who is gone) and leaves no engine of theirs, while a
// table whose owner runs (this test) stays.
func TestOrphansOfTwoKilledPartitionRunsAreUndone(t *testing.T) {
	needNet(t)
	t.Chdir(t.TempDir())
	blocked := blockSeconds(t, "main-partition")
	var cmds []*exec.Cmd
	var logs []*bytes.Buffer
	for range 2 {
		cmd, log := startP2pfault(t, "run", "--headless", "--time-scale", "0.5", "--timeline", "at 1s partition source-0",
			"--free-ports", "--engine-arg=--sim-startup-delay=0s")
		cmds, logs = append(cmds, cmd), append(logs, log)
	}
	tables := partitionsInForce(t, blocked, cmds, logs)
	self, err := owner.Self()
	if err != nil {
		t.Fatal(err)
	}
	alive, err := netfault.New(netfault.OwnedRunID("test-alive-owner", self))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = alive.Close() })

	var owners []owner.ID
	for i, cmd := range cmds {
		o, err := owner.Of(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		owners = append(owners, o)
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err == nil {
			t.Fatalf("run %d survived SIGKILL\n%s", i, logs[i].String())
		}
	}
	if names, _ := netfault.Tables(); !slices.Contains(names, tables[0]) || !slices.Contains(names, tables[1]) {
		t.Fatalf("after SIGKILL the tables %q are not both left (%q): nothing to show", tables, names)
	}
	// The doctor sees them: its leftovers check fails naming each table.
	// (It runs this binary as the sim for its engine checks: as p2pfault,
	// not as the test suite again.)
	t.Setenv("P2PFAULT_TEST_MAIN", "1")
	var stdout, stderr bytes.Buffer
	code := cli.Main([]string{"doctor", "--free-ports"}, strings.NewReader(""), &stdout, &stderr)
	leftovers := ""
	for _, line := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(line, "✗ leftovers: ") {
			leftovers = line
		}
	}
	for _, table := range tables {
		if code != 1 || !strings.Contains(leftovers, "firewall table inet "+table+" of p2pfault pid ") {
			t.Errorf("doctor: exit %d, want 1 with a ✗ leftovers line naming %s:\n%s%s", code, table, stdout.String(), stderr.String())
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := cli.Main([]string{"cleanup", "--orphans"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("cleanup --orphans: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	for i, table := range tables {
		said := "firewall table inet " + table + " of p2pfault pid " + strconv.Itoa(cmds[i].Process.Pid) + " (gone): deleted"
		if !strings.Contains(stdout.String(), said) {
			t.Errorf("cleanup --orphans did not say %q:\n%s", said, stdout.String())
		}
		assertTableGone(t, table, "after cleanup --orphans")
	}
	if names, _ := netfault.Tables(); !slices.Contains(names, alive.Table()) {
		t.Errorf("cleanup --orphans deleted %s, whose owner (this test) runs", alive.Table())
	}
	left, _ := runner.ScanOwned(netfault.Host{})
	for _, o := range left {
		if slices.Contains(owners, o.Owner) {
			t.Errorf("after cleanup --orphans, still there: %s", o)
		}
	}
}

// partitionsInForce waits until two run folders (besides the blocked
// ones) each record a partition in force in a table in the kernel, and
// returns the tables in the order of cmds, each named for its owner.
func partitionsInForce(t *testing.T, blocked []string, cmds []*exec.Cmd, logs []*bytes.Buffer) []string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		dirs := runFolders(t, blocked)
		byPid := map[int]string{}
		for _, d := range dirs {
			if recs := recordedTables(t, d); len(recs) == 1 && slices.Equal(recs[0].Faults, []string{"partition source-0"}) {
				if o, ok := netfault.TableOwner(recs[0].Table); ok {
					byPid[o.Pid] = recs[0].Table
				}
			}
		}
		names, _ := netfault.Tables()
		var tables []string
		for _, cmd := range cmds {
			if tb, ok := byPid[cmd.Process.Pid]; ok && slices.Contains(names, tb) {
				tables = append(tables, tb)
			}
		}
		if len(dirs) == 2 && len(tables) == 2 {
			for _, tb := range tables {
				t.Cleanup(func() { _, _ = netfault.DeleteTable(tb) })
			}
			return tables
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no two partitions recorded, each by its own run, within a minute\n%s\n%s", logs[0].String(), logs[1].String())
	return nil
}
