package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"

	"p2pfault/owner"
	"p2pfault/runner/session"
)

// ID is the process as package owner names it, its PID namespace not known.
func (id ProcID) ID() owner.ID { return owner.ID{Pid: id.Pid, StartTicks: id.StartTicks} }

// ownerMark is the environment variable that marks an engine the cluster
// launches as its owner's (owner.Env): this p2pfault, with its PID
// namespace, which the cluster's owner record does not carry.
func (c *Cluster) ownerMark() string {
	if self, err := owner.Self(); err == nil && self.Pid == c.owner.Pid && self.StartTicks == c.owner.StartTicks {
		return self.EnvVar()
	}
	return c.owner.ID().EnvVar()
}

// OwnedTables is the host's firewall as the orphan sweep uses it: the
// record's Tables, and the owner a table's name carries
// (netfault.Host: netfault.TableOwner).
type OwnedTables interface {
	Tables
	Owner(table string) (o owner.ID, ok bool)
}

// Owned is a piece of host state p2pfault made that names its owner: a
// firewall table (its name) or an engine session (its processes'
// environment, owner.Env). Gone says its owner is no longer running: an
// orphan, which no run will undo, found even when no record names it.
// An owner of another PID namespace is never gone (owner.ID.Gone): a
// sweep on a host must not end a container's live run, nor one in a
// container the host's.
type Owned struct {
	Table string // a firewall table's name, or "" for a session
	Sid   int    // an engine session's id
	Pids  []int  // the session's live processes
	Comm  string // the session leader's name, or its first process's
	Owner owner.ID
	Gone  bool
}

// String names the state and its owner, as cleanup and doctor print it.
func (o Owned) String() string {
	state := "running"
	switch {
	case o.Gone:
		state = "gone"
	case o.Owner.NS == 0:
		state = "its PID namespace not named: left to it"
	case !o.Owner.Here():
		// Its pid is another namespace's (a container's, or the host's
		// seen from one): whether it runs cannot be told from here.
		state = "of another PID namespace: left to it"
	}
	if o.Table != "" {
		return fmt.Sprintf("firewall table inet %s of p2pfault pid %d (%s)", o.Table, o.Owner.Pid, state)
	}
	return fmt.Sprintf("engine session %d (%s, pids %v) of p2pfault pid %d (%s)", o.Sid, o.Comm, o.Pids, o.Owner.Pid, state)
}

// ScanOwned lists every firewall table and engine session on this host
// that names its owner, each with whether that owner is gone. A table's
// owner is in its name; a session is listed only when every live process
// in it carries the same owner in its environment, so a session with any
// process p2pfault did not start is never one of them. Tables that cannot
// be listed (no CAP_NET_ADMIN) are an error, after the sessions.
func ScanOwned(host OwnedTables) ([]Owned, error) {
	out, err := ownedSessions()
	if err != nil {
		return nil, err
	}
	names, err := host.List()
	for _, name := range names {
		if o, ok := host.Owner(name); ok {
			out = append(out, Owned{Table: name, Owner: o, Gone: o.Gone()})
		}
	}
	if err != nil {
		return out, fmt.Errorf("firewall tables not listed: %w", err)
	}
	return out, nil
}

// Orphans is ScanOwned's state whose owner is gone.
func Orphans(host OwnedTables) ([]Owned, error) {
	all, err := ScanOwned(host)
	return slices.DeleteFunc(all, func(o Owned) bool { return !o.Gone }), err
}

// ownedSessions finds the sessions whose every live process carries one
// owner's mark (owner.Env), from /proc.
func ownedSessions() ([]Owned, error) {
	d, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	bySid := map[int]*Owned{}
	var sids []int
	for _, e := range d {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		o, ok := owner.Marked(pid)
		if !ok {
			continue
		}
		st, err := session.Stat(pid)
		if err != nil || !st.Live() || session.Guard(st.Sid) != nil {
			continue
		}
		if _, seen := bySid[st.Sid]; !seen {
			bySid[st.Sid] = &Owned{Sid: st.Sid, Owner: o, Gone: o.Gone()}
			sids = append(sids, st.Sid)
		}
	}
	sort.Ints(sids)
	var out []Owned
	for _, sid := range sids {
		if o, ok := wholeSession(*bySid[sid]); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// wholeSession fills in o's processes and reports whether every live one
// carries o's owner.
func wholeSession(o Owned) (Owned, bool) {
	ms, err := session.Members(o.Sid)
	if err != nil {
		return o, false
	}
	o.Pids = nil
	for _, m := range ms {
		if !m.Live() {
			continue
		}
		if id, ok := owner.Marked(m.Pid); !ok || id != o.Owner {
			return o, false
		}
		o.Pids = append(o.Pids, m.Pid)
		if m.Pid == o.Sid || o.Comm == "" {
			o.Comm = m.Comm
		}
	}
	return o, len(o.Pids) > 0
}

// CleanupOrphans undoes every orphan on this host (ScanOwned's state whose
// owner is gone): it deletes the firewall table, and ends the engine
// session as cleanup ends a recorded one (SIGCONT and SIGTERM, SIGKILL
// after a grace), each checked again just before. State whose owner runs
// is left alone and said so. It reports each on w and returns how many
// sessions it ended.
func CleanupOrphans(ctx context.Context, host OwnedTables, w io.Writer) (int, error) {
	all, scanErr := ScanOwned(host)
	ended, found := 0, 0
	var errs []error
	for _, o := range all {
		if !o.Gone {
			fmt.Fprintf(w, "%s: left alone\n", o)
			continue
		}
		found++
		if o.Table != "" {
			deleted, err := host.Delete(o.Table)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("delete %s: %w", o, err))
			case deleted:
				fmt.Fprintf(w, "%s: deleted (its faults healed)\n", o)
			default:
				fmt.Fprintf(w, "%s: already gone\n", o)
			}
			continue
		}
		if now, ok := wholeSession(o); !ok || !now.Owner.Gone() {
			continue // ended, or changed, since the scan
		}
		if err := endSession(ctx, o.Sid); err != nil {
			errs = append(errs, fmt.Errorf("end %s: %w", o, err))
			continue
		}
		ended++
		fmt.Fprintf(w, "%s: ended\n", o)
	}
	if found == 0 && scanErr == nil {
		fmt.Fprintln(w, "cleanup --orphans: no firewall table or engine of a p2pfault that is gone")
	}
	return ended, errors.Join(append([]error{scanErr}, errs...)...)
}
