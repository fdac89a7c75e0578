// Package owner names the p2pfault process that owns a piece of host state
// (a run folder's lock, a firewall table, an engine it launched) so that
// the state can be told apart from other runs' and, once its owner is
// gone, found and undone even when no record names it (`p2pfault cleanup
// --orphans`, `p2pfault doctor`).
//
// An owner is a pid and that process's start time (field 22 of
// /proc/PID/stat, in clock ticks after boot): a pid alone is reused, the
// pair is not within a boot. A pid means something only in its PID
// namespace, so an owner also carries its namespace (the inode of
// /proc/PID/ns/pid): a p2pfault in a container and one on its host see
// each other's processes under other pids, or none, and must never judge
// the other's owner gone. Its text form, the tag, is "PID.TICKS.NS"; it is
// carried in a firewall table's name (netfault.OwnedRunID) and in the
// environment of every engine p2pfault launches (Env), which every process
// the engine forks inherits.
package owner

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"p2pfault/runner/session"
)

// Env is the environment variable that marks a process as launched by
// the p2pfault its value names: P2PFAULT_OWNER=PID.TICKS.NS.
const Env = "P2PFAULT_OWNER"

// ID is one process across pid reuse.
type ID struct {
	Pid        int
	StartTicks uint64
	NS         uint64 // the PID namespace's inode; 0: not known
}

// self is read once: a process's pid and start time never change.
var self = sync.OnceValues(func() (ID, error) {
	st, err := session.Stat(os.Getpid())
	if err != nil {
		return ID{}, fmt.Errorf("read p2pfault's own start time: %w", err)
	}
	ns, err := PIDNamespace(os.Getpid())
	if err != nil {
		return ID{}, fmt.Errorf("read p2pfault's own PID namespace: %w", err)
	}
	return ID{Pid: st.Pid, StartTicks: st.StartTicks, NS: ns}, nil
})

// PIDNamespace is the inode of pid's PID namespace (/proc/PID/ns/pid reads
// "pid:[4026531836]").
func PIDNamespace(pid int) (uint64, error) {
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return 0, err
	}
	inode, ok := strings.CutPrefix(link, "pid:[")
	if inode, ok = strings.CutSuffix(inode, "]"); !ok {
		return 0, fmt.Errorf("/proc/%d/ns/pid reads %q, not pid:[INODE]", pid, link)
	}
	return strconv.ParseUint(inode, 10, 64)
}

// Self is this process.
func Self() (ID, error) { return self() }

// Of is the process pid is now (gone: an error wrapping os.ErrNotExist).
func Of(pid int) (ID, error) {
	st, err := session.Stat(pid)
	if err != nil {
		return ID{}, err
	}
	ns, err := PIDNamespace(pid)
	if err != nil {
		return ID{}, err
	}
	return ID{Pid: pid, StartTicks: st.StartTicks, NS: ns}, nil
}

// Alive reports whether the process still runs and is the same process:
// a process with that pid and that start time that has not exited. Its
// owner is gone otherwise ("no process with that pid, or one with another
// start time").
func (id ID) Alive() bool {
	st, err := session.Stat(id.Pid)
	return err == nil && st.Live() && st.StartTicks == id.StartTicks
}

// Gone reports whether the owner is known to have ended: it lived in this
// process's PID namespace and no longer runs there (Alive). An owner of
// another namespace, or of none known, is never gone: its pid means
// nothing here, and state it holds is left alone.
func (id ID) Gone() bool { return id.Here() && !id.Alive() }

// Here reports whether the owner lived in this process's PID namespace.
func (id ID) Here() bool {
	self, err := Self()
	return err == nil && id.NS != 0 && id.NS == self.NS
}

// Tag is the owner's text form, PID.TICKS.NS (PID.TICKS when its
// namespace is not known).
func (id ID) Tag() string {
	tag := strconv.Itoa(id.Pid) + "." + strconv.FormatUint(id.StartTicks, 10)
	if id.NS != 0 {
		tag += "." + strconv.FormatUint(id.NS, 10)
	}
	return tag
}

// EnvVar is the KEY=VALUE that marks a process launched by id.
func (id ID) EnvVar() string { return Env + "=" + id.Tag() }

// String is how messages name the owner.
func (id ID) String() string {
	return fmt.Sprintf("p2pfault pid %d (start time %d)", id.Pid, id.StartTicks)
}

// ParseTag reads a tag (PID.TICKS.NS, or PID.TICKS); ok is false for
// anything else.
func ParseTag(s string) (id ID, ok bool) {
	p, t, found := strings.Cut(s, ".")
	if !found {
		return ID{}, false
	}
	t, n, hasNS := strings.Cut(t, ".")
	var ns uint64
	if hasNS {
		v, err := strconv.ParseUint(n, 10, 64)
		if err != nil || v == 0 || strconv.FormatUint(v, 10) != n {
			return ID{}, false
		}
		ns = v
	}
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != p {
		return ID{}, false
	}
	ticks, err := strconv.ParseUint(t, 10, 64)
	if err != nil || strconv.FormatUint(ticks, 10) != t {
		return ID{}, false
	}
	return ID{Pid: pid, StartTicks: ticks, NS: ns}, true
}

// Marked is the owner a process's environment names (Env), read from
// /proc/PID/environ: the environment it was started with. ok is false when
// it names none, or the environment cannot be read (the process is gone,
// or is another user's and this one lacks the rights).
func Marked(pid int) (id ID, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ID{}, false
	}
	prefix := []byte(Env + "=")
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		if bytes.HasPrefix(kv, prefix) {
			return ParseTag(string(kv[len(prefix):])) // the first one, as getenv reads it
		}
	}
	return ID{}, false
}
