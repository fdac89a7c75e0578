package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"p2pfault/netfault"
	"p2pfault/runner"
)

func readFirewall(t *testing.T, dir string) []runner.FirewallEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, runner.SessionsFile))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Firewall []runner.FirewallEntry `json:"firewall"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Firewall
}

// TestFirewallTablesAreRecordedCarriedAndCleanedUp: a table a crashed run
// left (its owner gone) is kept in the record of a new run in the same
// folder; the new run's own table is recorded with its faults and dropped
// when forgotten, also after the cluster stopped; cleanup deletes the
// carried table and says which partition it healed.
func TestFirewallTablesAreRecordedCarriedAndCleanedUp(t *testing.T) {
	if err := netfault.Check("this test"); err != nil {
		t.Skipf("skipped: the kernel firewall cannot be changed here: %v", err)
	}
	id := fmt.Sprintf("runnertest-%d", os.Getpid())
	fw, err := netfault.New(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Close() })
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fakeConfig(t)
	cfg.Sources = 1
	old := runner.FirewallEntry{Table: fw.Table(), Faults: []string{"partition source-0"}, Owner: deadOwner(), BootID: strings.TrimSpace(string(boot))}
	// A table of a p2pfault that still runs (another run in this folder,
	// a live process here): kept in the record, left alone by cleanup.
	running := startLoner(t)
	busy := runner.FirewallEntry{Table: netfault.TableName(id + "-busy"), Owner: runner.ProcID{Pid: running.Pid, StartTicks: running.StartTicks}, BootID: old.BootID}
	b, _ := json.Marshal(map[string]any{"owner": deadOwner(), "engines": []any{}, "firewall": []any{old, busy}})
	if err := os.WriteFile(filepath.Join(cfg.OutDir, runner.SessionsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	left, err := runner.LeftoverTables(cfg.OutDir, netfault.Host{})
	if err != nil || len(left) != 1 || left[0].Table != fw.Table() || left[0].Unknown {
		t.Fatalf("LeftoverTables = %+v, %v; want the crashed run's table, known to be in the kernel", left, err)
	}

	c, _ := startCluster(t, cfg)
	if got := readFirewall(t, cfg.OutDir); len(got) != 2 || got[0].Table != fw.Table() || got[1].Table != busy.Table {
		t.Fatalf("the new run's record lost another run's table: %+v", got)
	}
	mine := netfault.TableName(id + "-new")
	if err := c.RecordFirewall(mine, []string{"loss 30% source-0"}); err != nil {
		t.Fatal(err)
	}
	got := readFirewall(t, cfg.OutDir)
	if i := slices.IndexFunc(got, func(e runner.FirewallEntry) bool { return e.Table == mine }); i < 0 || !slices.Equal(got[i].Faults, []string{"loss 30% source-0"}) {
		t.Fatalf("record after RecordFirewall: %+v", got)
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.RecordFirewall(mine+"x", nil); err == nil {
		t.Error("RecordFirewall after Stop succeeded: a table made then would not be recorded")
	}
	if err := c.ForgetFirewall(mine); err != nil {
		t.Fatal(err)
	}
	if got := readFirewall(t, cfg.OutDir); len(got) != 2 {
		t.Fatalf("record after ForgetFirewall past Stop: %+v, want only the other runs' two", got)
	}

	var out bytes.Buffer
	if _, err := runner.Cleanup(context.Background(), cfg.OutDir, netfault.Host{}, &out); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out.String())
	}
	want := "firewall table inet " + fw.Table() + ": deleted; partition source-0 healed by cleanup\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("cleanup said:\n%s\nwant %q", out.String(), want)
	}
	if names, _ := netfault.Tables(); slices.Contains(names, fw.Table()) {
		t.Errorf("table %s still in the kernel after cleanup", fw.Table())
	}
	if left := "firewall table inet " + busy.Table + " belongs to p2pfault pid " + fmt.Sprint(running.Pid) + ", which is still running; left alone\n"; !strings.Contains(out.String(), left) {
		t.Errorf("cleanup said:\n%s\nwant %q", out.String(), left)
	}
	if got := readFirewall(t, cfg.OutDir); len(got) != 1 || got[0].Table != busy.Table {
		t.Errorf("record after cleanup: %+v, want only the running p2pfault's table", got)
	}
}
