package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"p2pfault/runfolder"
	"p2pfault/runner"
	"p2pfault/runner/session"
	"p2pfault/safefile"
)

// RecordFile is the record's name in a run's folder (the run folder
// layout's, runfolder.Stalls).
const RecordFile = runfolder.Stalls

// Stall is one stall in force, written before SIGSTOP (or the stall
// command) is sent and removed once it is resumed, so that `p2pfault
// cleanup` can resume what a dead p2pfault left stopped if its guard failed
// too.
type Stall struct {
	Source  string          `json:"source"`
	Sid     int             `json:"sid,omitempty"`     // local: the stalled session
	Members []runner.ProcID `json:"members,omitempty"` // local: the processes stopped
	Part    bool            `json:"part,omitempty"`    // local: Members alone were stopped (one rank's engine core), and are resumed alone
	Resume  []string        `json:"resume,omitempty"`  // commands: the resume argv, filled in, for people only (cleanup --attach runs the attach file's)
	Owner   runner.ProcID   `json:"owner"`             // the p2pfault that stalled it
	Guard   runner.ProcID   `json:"guard"`
	BootID  string          `json:"boot_id"`
	Since   time.Time       `json:"since"`

	// Cmdlines are the Members' command lines when stalled: cleanup
	// resumes only processes /proc shows are still these.
	Cmdlines runner.Cmdlines `json:"cmdlines,omitempty"`
}

// Record is the content of stalls.json.
type Record struct {
	Updated time.Time `json:"updated"`
	Stalls  []Stall   `json:"stalls"`
}

// Book keeps the record file of one run up to date. Its methods are safe
// for concurrent use.
type Book struct {
	mu   sync.Mutex
	path string
	rec  Record
}

// NewBook returns a book writing path (e.g. OUT/stalls.json). It keeps the
// stalls an earlier run in the same folder left recorded.
func NewBook(path string) (*Book, error) {
	rec, err := ReadRecord(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return &Book{path: path, rec: rec}, nil
}

// Path is the record file.
func (b *Book) Path() string { return b.path }

// Add records s (Owner and BootID filled in when empty) and writes the file.
func (b *Book) Add(s Stall) error {
	if s.Owner == (runner.ProcID{}) {
		s.Owner = Self()
	}
	if s.BootID == "" {
		s.BootID = BootID()
	}
	if s.Since.IsZero() {
		s.Since = time.Now()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rec.Stalls = append(b.rec.Stalls, s)
	return b.write()
}

// Remove drops the stalls of source that this p2pfault recorded.
func (b *Book) Remove(source string) error {
	self := Self()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rec.Stalls = slices.DeleteFunc(b.rec.Stalls, func(s Stall) bool { return s.Source == source && s.Owner == self })
	return b.write()
}

func (b *Book) write() error {
	b.rec.Updated = time.Now()
	if b.rec.Stalls == nil {
		b.rec.Stalls = []Stall{}
	}
	return writeRecord(b.path, b.rec)
}

// writeRecord replaces the record in one step (a reader, or a crash, sees
// the old record or the new one), mode 0600: cleanup trusts only a record
// no one else could have written.
func writeRecord(path string, rec Record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return safefile.Write(path, append(data, '\n'), safefile.RecordPerm)
}

// ReadRecord reads a record file if it can be trusted (safefile.ReadRecord:
// this user's, writable by no one else, not a link); a missing file wraps
// fs.ErrNotExist.
func ReadRecord(path string) (Record, error) {
	var rec Record
	data, err := safefile.ReadRecord(path)
	var te *safefile.TrustError
	if errors.As(err, &te) {
		return rec, err // it names the file and why
	}
	if err != nil {
		return rec, fmt.Errorf("read stall record: %w", err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("read %s: %w", path, err)
	}
	return rec, nil
}

// Self is this process's identity.
func Self() runner.ProcID {
	st, err := session.Stat(os.Getpid())
	if err != nil {
		return runner.ProcID{Pid: os.Getpid()}
	}
	return runner.ProcID{Pid: st.Pid, StartTicks: st.StartTicks}
}

// BootID tells boots apart: pids and start ticks of another boot say
// nothing about this one's processes.
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ResumeFrom gives the resume argv of a commands source, filled in, from
// the attach file the user named (`p2pfault cleanup DIR --attach FILE`),
// by the stall's source name ("pod-a", or "pod-a/rank1" for one rank).
type ResumeFrom func(source string) ([]string, error)

// ResumeRecorded resumes what the record at path says is still stalled by a
// p2pfault that is no longer running. A local stall: SIGCONT to the
// processes /proc shows are still the ones stalled (pid, start time,
// session and command line, runner.Still; to those alone for a stall of
// one rank, Stall.Part), unless they already run (their guard resumed
// them). A commands stall: the resume command of the attach file from
// gives, never one read from the record; with from nil it says what it
// cannot undo and how. Stalls of a p2pfault that still runs are left
// alone. It reports each stall on w, rewrites the record with what is
// left and returns how many it resumed. A missing record resumes nothing;
// one that cannot be trusted (safefile.ReadRecord) is an error naming it.
func ResumeRecorded(ctx context.Context, path string, w io.Writer, from ResumeFrom) (int, error) {
	rec, err := ReadRecord(path)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(w, "%s: no stall record, nothing to resume\n", filepath.Dir(path))
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	self, boot := Self(), BootID()
	resumed := 0
	var errs []error
	var keep []Stall
	for _, s := range rec.Stalls {
		var done, kept bool
		var err error
		switch {
		case s.BootID != boot:
			fmt.Fprintf(w, "%s: stall recorded in another boot; nothing to resume\n", s.Source)
		case s.Owner != self && s.Owner.Alive():
			fmt.Fprintf(w, "%s: stalled by p2pfault pid %d, which is still running; left alone\n", s.Source, s.Owner.Pid)
			kept = true
		case s.Sid != 0:
			done, kept, err = resumeLocal(s, w)
		default:
			done, kept, err = resumeByCommand(ctx, s, from, w)
		}
		if done {
			resumed++
		}
		if kept {
			keep = append(keep, s)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	rec.Stalls, rec.Updated = keep, time.Now()
	if rec.Stalls == nil {
		rec.Stalls = []Stall{}
	}
	if err := writeRecord(path, rec); err != nil {
		errs = append(errs, err)
	}
	return resumed, errors.Join(errs...)
}

// resumeLocal continues a local stall's processes if /proc shows they are
// still the ones stalled and still stopped; it reports whether it resumed
// them and whether the stall stays recorded.
func resumeLocal(s Stall, w io.Writer) (resumed, keep bool, err error) {
	same, why := runner.Still(s.Sid, s.Members, s.Cmdlines)
	switch {
	case len(same) == 0 && why != "":
		fmt.Fprintf(w, "%s: session %d: %s: left alone\n", s.Source, s.Sid, why)
		return false, true, nil
	case len(same) == 0:
		fmt.Fprintf(w, "%s: session %d is gone; nothing to resume\n", s.Source, s.Sid)
		return false, false, nil
	case !anyStopped(s.Sid, same, s.Part):
		fmt.Fprintf(w, "%s: session %d is already running (its guard, or someone, resumed it); nothing to resume\n", s.Source, s.Sid)
		return false, false, nil
	}
	sent, err := Continue(s.Sid, same, s.Part)
	switch {
	case err != nil:
		return false, true, fmt.Errorf("resume %s session %d: %w", s.Source, s.Sid, err)
	case len(sent) == 0:
		fmt.Fprintf(w, "%s: session %d is gone; nothing to resume\n", s.Source, s.Sid)
		return false, false, nil
	case s.Part:
		fmt.Fprintf(w, "%s: resumed pids %v of session %d (the rest of it was not stalled)\n", s.Source, sent, s.Sid)
	default:
		fmt.Fprintf(w, "%s: resumed session %d (pids %v)\n", s.Source, s.Sid, sent)
	}
	return true, false, nil
}

// anyStopped reports whether a process of the stall is stopped: one of
// same for a stall of one rank (Part), any of the session's otherwise.
func anyStopped(sid int, same []runner.ProcID, part bool) bool {
	if part {
		for _, p := range still(sid, same) {
			if p.Stopped() {
				return true
			}
		}
		return false
	}
	ms, err := session.Members(sid)
	if err != nil {
		return true // cannot tell: SIGCONT to a running process does nothing
	}
	for _, m := range ms {
		if m.Live() && m.Stopped() {
			return true
		}
	}
	return false
}

// resumeByCommand runs the resume command the attach file gives for a
// commands stall, or says why it cannot and how to resume it by hand.
func resumeByCommand(ctx context.Context, s Stall, from ResumeFrom, w io.Writer) (resumed, keep bool, err error) {
	if from == nil {
		recorded := ""
		if len(s.Resume) > 0 {
			recorded = fmt.Sprintf(" (the record says %q; check it against the file before running it)", s.Resume)
		}
		fmt.Fprintf(w, "%s: stalled by a command; not resumed, as cleanup runs no command read from a record: give the attach file (`p2pfault cleanup DIR --attach FILE`) or run that file's resume command for %s by hand%s\n",
			s.Source, s.Source, recorded)
		return false, true, nil
	}
	argv, err := from(s.Source)
	if err != nil {
		fmt.Fprintf(w, "%s: not resumed: %v\n", s.Source, err)
		return false, true, nil
	}
	out, code, err := RunCommand(ctx, argv, time.Minute)
	if err != nil {
		return false, true, fmt.Errorf("resume %s: %q %w: %s", s.Source, argv, err, strings.TrimSpace(out))
	}
	fmt.Fprintf(w, "%s: ran the attach file's resume command %q (exit %d)\n", s.Source, argv, code)
	return true, false, nil
}
