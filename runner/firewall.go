package runner

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Tables is the host's firewall as the record's readers use it: runner
// knows only the table names it recorded, never how a table is made or
// deleted (netfault.Host is the implementation).
type Tables interface {
	// List names p2pfault's tables in the kernel now.
	List() ([]string, error)
	// Delete deletes a table p2pfault made and reports whether it was
	// there.
	Delete(name string) (deleted bool, err error)
}

// FirewallEntry is a firewall table of a run as sessions.json records it:
// written before the table is created, updated before each network fault
// in it changes, dropped once the table is deleted, so that after a
// SIGKILL of p2pfault `p2pfault cleanup` finds and deletes it.
type FirewallEntry struct {
	Table  string   `json:"table"`            // the table's name (netfault.TableName of the run id)
	Faults []string `json:"faults,omitempty"` // in force, e.g. "partition source-0"
	Owner  ProcID   `json:"owner"`            // the p2pfault that made it
	BootID string   `json:"boot_id"`          // tables do not outlive a boot
}

// firewallRecord is the cluster's share of sessions.json for tables.
type firewallRecord struct {
	mu      sync.Mutex
	entries []FirewallEntry // this run's, then an earlier run's still named
}

func (r *firewallRecord) list() []FirewallEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]FirewallEntry, len(r.entries))
	for i, e := range r.entries {
		e.Faults = slices.Clone(e.Faults)
		out[i] = e
	}
	return out
}

// RecordFirewall records (or updates) the run's firewall table and the
// faults in force in it in sessions.json, and returns once the file is
// written: call it before creating the table or changing its rules. It
// fails once the cluster has stopped (its record is final).
func (c *Cluster) RecordFirewall(table string, faults []string) error {
	c.sessionMu.Lock()
	defer c.sessionMu.Unlock()
	if c.finalSave {
		return fmt.Errorf("record firewall table %s: the cluster has stopped", table)
	}
	c.firewall.mu.Lock()
	e := FirewallEntry{Table: table, Faults: slices.Clone(faults), Owner: c.owner, BootID: c.bootID}
	if i := slices.IndexFunc(c.firewall.entries, func(x FirewallEntry) bool { return x.Table == table }); i >= 0 {
		c.firewall.entries[i] = e
	} else {
		c.firewall.entries = append(c.firewall.entries, e)
	}
	c.firewall.mu.Unlock()
	return c.writeSessionsLocked()
}

// ForgetFirewall drops a deleted table from sessions.json, also after the
// cluster stopped (Ctrl-C stops the engines while the table is deleted).
func (c *Cluster) ForgetFirewall(table string) error {
	c.sessionMu.Lock()
	defer c.sessionMu.Unlock()
	c.firewall.mu.Lock()
	c.firewall.entries = slices.DeleteFunc(c.firewall.entries, func(x FirewallEntry) bool { return x.Table == table })
	c.firewall.mu.Unlock()
	if !c.finalSave {
		return c.writeSessionsLocked()
	}
	f, err := readSessionsFile(c.cfg.OutDir)
	if err != nil {
		return err
	}
	f.Firewall = slices.DeleteFunc(f.Firewall, func(x FirewallEntry) bool { return x.Table == table })
	return writeSessionsFile(c.cfg.OutDir, f)
}

// leftoverFirewall keeps the tables of another run that used this folder
// (same boot; its p2pfault gone, or still running) in the new record, so
// cleanup still finds them; cleanup leaves a running p2pfault's alone.
func (c *Cluster) leftoverFirewall(f sessionsFile) {
	for _, e := range f.Firewall {
		if e.BootID == c.bootID && e.Owner != c.owner {
			c.firewall.entries = append(c.firewall.entries, e)
		}
	}
}

// LeftoverTable is a firewall table named in a run's sessions.json whose
// p2pfault is gone and which is still in the kernel (or may be: Unknown
// when the tables cannot be listed here, for want of rights).
type LeftoverTable struct {
	FirewallEntry
	Unknown bool
}

// LeftoverTables returns the tables the sessions.json in dir names that a
// run left behind and that host still has, so a new run can warn about
// them.
func LeftoverTables(dir string, host Tables) ([]LeftoverTable, error) {
	f, boot, err := readRecord(dir)
	if err != nil || f == nil {
		return nil, err
	}
	var have []string
	var listErr error
	listed := false
	var out []LeftoverTable
	for _, e := range f.Firewall {
		if e.BootID != boot || e.Owner.Alive() {
			continue
		}
		if !listed {
			have, listErr = host.List()
			listed = true
		}
		if listErr == nil && !slices.Contains(have, e.Table) {
			continue
		}
		out = append(out, LeftoverTable{FirewallEntry: e, Unknown: listErr != nil})
	}
	return out, nil
}

// cleanupFirewall deletes from host each recorded table whose p2pfault is
// gone (or is this one) and says so on w; it returns the entries to keep.
func cleanupFirewall(entries []FirewallEntry, host Tables, self ProcID, boot string, w io.Writer) ([]FirewallEntry, error) {
	var keep []FirewallEntry
	var errs []error
	for _, e := range entries {
		if e.BootID != boot {
			fmt.Fprintf(w, "firewall table inet %s: gone with the boot that made it\n", e.Table)
			continue
		}
		if e.Owner != self && e.Owner.Alive() {
			fmt.Fprintf(w, "firewall table inet %s belongs to p2pfault pid %d, which is still running; left alone\n", e.Table, e.Owner.Pid)
			keep = append(keep, e)
			continue
		}
		deleted, err := host.Delete(e.Table)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("clean up firewall table inet %s: %w", e.Table, err))
			keep = append(keep, e)
		case !deleted:
			fmt.Fprintf(w, "firewall table inet %s is already gone\n", e.Table)
		case len(e.Faults) == 0:
			fmt.Fprintf(w, "firewall table inet %s: deleted (no network fault was in force)\n", e.Table)
		default:
			fmt.Fprintf(w, "firewall table inet %s: deleted; %s healed by cleanup\n", e.Table, strings.Join(e.Faults, ", "))
		}
	}
	return keep, errors.Join(errs...)
}
