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
	Resume  []string        `json:"resume,omitempty"`  // commands: the resume argv, filled in
	Owner   runner.ProcID   `json:"owner"`             // the p2pfault that stalled it
	Guard   runner.ProcID   `json:"guard"`
	BootID  string          `json:"boot_id"`
	Since   time.Time       `json:"since"`
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

func writeRecord(path string, rec Record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".stalls-*.json")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(append(data, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	// rename(2): a reader or a crash sees the old record or the new one.
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadRecord reads a record file; a missing file wraps fs.ErrNotExist.
func ReadRecord(path string) (Record, error) {
	var rec Record
	data, err := os.ReadFile(path)
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

// ResumeRecorded resumes what the record at path says is still stalled by a
// p2pfault that is no longer running: SIGCONT to a session that still holds
// a stalled process (pid and start time checked, as runner.Cleanup does;
// to those processes alone for a stall of one rank, Stall.Part),
// or the recorded resume command. Stalls of a p2pfault that still runs are
// left alone. It reports each stall on w, rewrites the record with what is
// left and returns how many it resumed. A missing record resumes nothing.
func ResumeRecorded(ctx context.Context, path string, w io.Writer) (int, error) {
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
		switch {
		case s.BootID != boot:
			fmt.Fprintf(w, "%s: stall recorded in another boot; nothing to resume\n", s.Source)
		case s.Owner != self && s.Owner.Alive():
			fmt.Fprintf(w, "%s: stalled by p2pfault pid %d, which is still running; left alone\n", s.Source, s.Owner.Pid)
			keep = append(keep, s)
		case s.Sid != 0:
			sent, err := Continue(s.Sid, s.Members, s.Part)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("resume %s session %d: %w", s.Source, s.Sid, err))
				keep = append(keep, s)
			case len(sent) == 0:
				fmt.Fprintf(w, "%s: session %d is gone; nothing to resume\n", s.Source, s.Sid)
			case s.Part:
				resumed++
				fmt.Fprintf(w, "%s: resumed pids %v of session %d (the rest of it was not stalled)\n", s.Source, sent, s.Sid)
			default:
				resumed++
				fmt.Fprintf(w, "%s: resumed session %d (pids %v)\n", s.Source, s.Sid, sent)
			}
		case len(s.Resume) > 0:
			out, code, err := RunCommand(ctx, s.Resume, time.Minute)
			if err != nil {
				errs = append(errs, fmt.Errorf("resume %s: %q %w: %s", s.Source, s.Resume, err, strings.TrimSpace(out)))
				keep = append(keep, s)
				continue
			}
			resumed++
			fmt.Fprintf(w, "%s: ran %q (exit %d)\n", s.Source, s.Resume, code)
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
