package verify

import (
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/procfs"
)

// Proc is what verification reads of one process.
type Proc struct {
	Pid   int
	Sid   int
	State string // R, S, D, T (stopped by a signal), t (traced), Z (zombie), X, ...
	Start uint64 // start time after boot, in clock ticks
}

// Live reports whether the process still runs or is stopped: a zombie has
// exited and only waits to be reaped.
func (p Proc) Live() bool { return p.State != "Z" && p.State != "X" }

// Reader reads the process table. Tests fake it; ProcFS reads /proc.
type Reader interface {
	// Session lists every process of session sid, zombies included.
	Session(sid int) ([]Proc, error)
	// Proc reads one process; ok is false when there is no such pid.
	Proc(pid int) (p Proc, ok bool, err error)
}

// ProcFS reads a proc filesystem with prometheus/procfs.
type ProcFS struct{ fs procfs.FS }

// NewProcFS opens the proc filesystem at mount ("" for /proc).
func NewProcFS(mount string) (ProcFS, error) {
	if mount == "" {
		mount = procfs.DefaultMountPoint
	}
	fs, err := procfs.NewFS(mount)
	if err != nil {
		return ProcFS{}, fmt.Errorf("open %s: %w", mount, err)
	}
	return ProcFS{fs: fs}, nil
}

func fromStat(s procfs.ProcStat) Proc {
	return Proc{Pid: s.PID, Sid: s.Session, State: s.State, Start: s.Starttime}
}

// Session scans every process; one that ends during the scan is skipped.
func (f ProcFS) Session(sid int) ([]Proc, error) {
	all, err := f.fs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Proc
	for _, p := range all {
		st, err := p.Stat()
		if err != nil || st.Session != sid {
			continue
		}
		out = append(out, fromStat(st))
	}
	return out, nil
}

// Proc reads /proc/PID/stat.
func (f ProcFS) Proc(pid int) (Proc, bool, error) {
	p, err := f.fs.Proc(pid)
	if err == nil {
		var st procfs.ProcStat
		if st, err = p.Stat(); err == nil {
			return fromStat(st), true, nil
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return Proc{}, false, nil
	}
	return Proc{}, false, fmt.Errorf("read process %d: %w", pid, err)
}
