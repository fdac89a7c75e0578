package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"p2pfault/runfolder"
	"p2pfault/runner/session"
	"p2pfault/safefile"
)

// SessionsFile is the name, in a run's output folder, of the record of the
// run's engine sessions, rewritten whenever one starts or ends (its name
// is the run folder layout's, runfolder.Sessions).
const SessionsFile = runfolder.Sessions

// ProcID identifies a process across pid reuse: its pid and its start time
// in clock ticks after boot (field 22 of /proc/PID/stat).
type ProcID struct {
	Pid        int    `json:"pid"`
	StartTicks uint64 `json:"start_ticks"`
}

// Alive reports whether the process still runs and is the same process.
func (id ProcID) Alive() bool {
	st, err := session.Stat(id.Pid)
	return err == nil && st.Live() && st.StartTicks == id.StartTicks
}

// SessionEntry is one engine session of a run as sessions.json records it.
type SessionEntry struct {
	Engine     string    `json:"engine"`
	Pid        int       `json:"pid"`
	Sid        int       `json:"sid"`
	StartTicks uint64    `json:"start_ticks"`
	Started    time.Time `json:"started"`
	Argv       []string  `json:"argv"`
	Members    []ProcID  `json:"members,omitempty"` // the session's processes once ready
	Owner      ProcID    `json:"owner"`             // the p2pfault process that started it
	BootID     string    `json:"boot_id"`

	// Cmdlines are the leader's command line as it started and each
	// member's once ready: cleanup ends the session only if /proc still
	// shows one of them.
	Cmdlines Cmdlines `json:"cmdlines,omitempty"`
}

// sessionsFile is the content of sessions.json.
type sessionsFile struct {
	Updated time.Time      `json:"updated"`
	Owner   ProcID         `json:"owner"`
	BootID  string         `json:"boot_id"`
	Engines []SessionEntry `json:"engines"`
	// Leftovers are live sessions of an earlier run that used this folder,
	// kept so that cleanup still finds them.
	Leftovers []SessionEntry `json:"leftovers,omitempty"`
	// Firewall lists the run's firewall tables (network faults), recorded
	// before each is created, and an earlier run's left behind.
	Firewall []FirewallEntry `json:"firewall,omitempty"`
}

func selfID() (ProcID, error) {
	st, err := session.Stat(os.Getpid())
	if err != nil {
		return ProcID{}, fmt.Errorf("read p2pfault's own start time: %w", err)
	}
	return ProcID{Pid: st.Pid, StartTicks: st.StartTicks}, nil
}

// bootID tells two boots apart: pids and start ticks of another boot say
// nothing about this one's processes.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// writeSessions rewrites sessions.json atomically with every session of the
// run that still has a live process.
func (c *Cluster) writeSessions() error {
	c.sessionMu.Lock()
	defer c.sessionMu.Unlock()
	return c.writeSessionsLocked()
}

func (c *Cluster) writeSessionsLocked() error {
	if c.finalSave {
		return nil
	}
	f := sessionsFile{Updated: time.Now(), Owner: c.owner, BootID: c.bootID, Engines: []SessionEntry{}, Leftovers: c.leftovers,
		Firewall: c.firewall.list()}
	for _, e := range c.engines {
		e.mu.Lock()
		p := e.proc
		var members []ProcID
		var cmdlines Cmdlines
		if p != nil {
			members = append(members, p.members...)
			cmdlines = p.cmdlines
		}
		argv := e.spec.Argv()
		e.mu.Unlock()
		if p == nil {
			continue
		}
		if p.reaped() {
			// The leader is gone; keep the entry while its session is not.
			if live, err := session.Live(p.sid); err != nil || len(live) == 0 {
				continue
			}
		}
		f.Engines = append(f.Engines, SessionEntry{
			Engine: e.spec.Name, Pid: p.pid, Sid: p.sid, StartTicks: p.startTicks,
			Started: p.started, Argv: argv, Members: members, Cmdlines: cmdlines,
			Owner: c.owner, BootID: c.bootID,
		})
	}
	return writeSessionsFile(c.cfg.OutDir, f)
}

// writeSessionsFile rewrites dir's sessions.json in one step (a reader,
// or a crash, sees the old record or the new one), mode 0600: cleanup
// trusts only a record no one else could have written.
func writeSessionsFile(dir string, f sessionsFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", SessionsFile, err)
	}
	return safefile.Write(filepath.Join(dir, SessionsFile), append(b, '\n'), safefile.RecordPerm)
}

// readSessionsFile reads dir's sessions.json if it can be trusted
// (safefile.ReadRecord: this user's, writable by no one else, not a link).
func readSessionsFile(dir string) (sessionsFile, error) {
	var f sessionsFile
	b, err := safefile.ReadRecord(filepath.Join(dir, SessionsFile))
	if err != nil {
		return f, recordError("sessions", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("read %s: %w", filepath.Join(dir, SessionsFile), err)
	}
	return f, nil
}

// readRecord reads dir's sessions.json for the leftover warnings, with this
// boot's id (a record of another boot names nothing alive); f is nil when
// the folder has no record.
func readRecord(dir string) (f *sessionsFile, boot string, err error) {
	rec, err := readSessionsFile(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	return &rec, bootID(), nil
}

// Leftover is a session named in a run's sessions.json that still has a
// live process of that run.
type Leftover struct {
	SessionEntry
	Live       []int // live pids of the session now
	OwnerAlive bool  // the p2pfault that started it still runs
}

// verify reports whether e's session still holds a process of that run: its
// leader or a recorded member, same pid, same start time, same session and
// same command line (Still). When a process matches all but the command
// line, why says so and the session is not that run's to end.
func (e SessionEntry) verify(boot string) (ok bool, why string) {
	if e.BootID != boot || e.Sid <= 1 {
		return false, ""
	}
	same, why := Still(e.Sid, append([]ProcID{{Pid: e.Pid, StartTicks: e.StartTicks}}, e.Members...), e.Cmdlines)
	return len(same) > 0, why
}

// Leftovers returns the sessions that the sessions.json in dir names and
// that are still alive, so a new run can warn about a run left behind. A
// folder without the file has none.
func Leftovers(dir string) ([]Leftover, error) {
	f, boot, err := readRecord(dir)
	if err != nil || f == nil {
		return nil, err
	}
	var out []Leftover
	for _, e := range append(f.Engines, f.Leftovers...) {
		if ok, _ := e.verify(boot); !ok {
			continue
		}
		live, _ := session.Live(e.Sid)
		out = append(out, Leftover{SessionEntry: e, Live: live, OwnerAlive: e.Owner.Alive()})
	}
	return out, nil
}

// cleanupGrace is how long Cleanup waits after SIGTERM before SIGKILL.
const cleanupGrace = 5 * time.Second

// Cleanup ends the sessions that the sessions.json in dir names, after
// checking that each still holds that run's process (pid and start time
// from /proc): SIGTERM and SIGCONT, SIGKILL after a grace (at most 5 s,
// less if ctx ends). Sessions of a p2pfault that is still running are left
// alone. It also deletes the firewall tables the file names (network
// faults: their partitions are healed) from host. It reports each session
// and table on w and returns how many sessions it ended.
func Cleanup(ctx context.Context, dir string, host Tables, w io.Writer) (int, error) {
	f, err := readSessionsFile(dir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(w, "%s: no %s, nothing to clean up\n", dir, SessionsFile)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	self, err := selfID()
	if err != nil {
		return 0, err
	}
	boot := bootID()
	ended := 0
	var errs []error
	var keepEngines, keepLeft []SessionEntry
	handle := func(e SessionEntry) bool { // reports whether to keep e in the file
		if ok, why := e.verify(boot); !ok {
			if why != "" { // a process p2pfault cannot tell is the engine
				fmt.Fprintf(w, "%s: session %d: %s: left alone\n", e.Engine, e.Sid, why)
				return true
			}
			fmt.Fprintf(w, "%s: session %d is already gone\n", e.Engine, e.Sid)
			return false
		}
		if e.Owner != self && e.Owner.Alive() {
			fmt.Fprintf(w, "%s: session %d belongs to p2pfault pid %d, which is still running; left alone\n", e.Engine, e.Sid, e.Owner.Pid)
			return true
		}
		live, _ := session.Live(e.Sid)
		if err := endSession(ctx, e.Sid); err != nil {
			errs = append(errs, fmt.Errorf("clean up %s session %d: %w", e.Engine, e.Sid, err))
			return true
		}
		ended++
		fmt.Fprintf(w, "%s: ended session %d (pids %v)\n", e.Engine, e.Sid, live)
		return false
	}
	for _, e := range f.Engines {
		if handle(e) {
			keepEngines = append(keepEngines, e)
		}
	}
	for _, e := range f.Leftovers {
		if handle(e) {
			keepLeft = append(keepLeft, e)
		}
	}
	keepTables, err := cleanupFirewall(f.Firewall, host, self, boot, w)
	if err != nil {
		errs = append(errs, err)
	}
	// A running owner rewrites the file itself; otherwise record what is left.
	if f.Owner == self || !f.Owner.Alive() {
		f.Engines, f.Leftovers, f.Firewall, f.Updated = keepEngines, keepLeft, keepTables, time.Now()
		if f.Engines == nil {
			f.Engines = []SessionEntry{}
		}
		if err := writeSessionsFile(dir, f); err != nil {
			errs = append(errs, err)
		}
	}
	return ended, errors.Join(errs...)
}

// endSession ends every process of session sid: SIGTERM and SIGCONT, then
// SIGKILL after the grace.
func endSession(ctx context.Context, sid int) error {
	if err := terminate(sid); err != nil {
		return err
	}
	return session.Drain(ctx, sid, cleanupGrace, killWait, nil)
}
