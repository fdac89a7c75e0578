package verify

import (
	"errors"
	"os"

	"p2pfault/runner/session"
)

// Reader reads the process table, one session.Proc per process: the one
// type a process has, as runner/session reads /proc/PID/stat. Tests fake
// it; Procs reads /proc.
type Reader interface {
	// Session lists every process of session sid, zombies included.
	Session(sid int) ([]session.Proc, error)
	// Proc reads one process; ok is false when there is no such pid.
	Proc(pid int) (p session.Proc, ok bool, err error)
}

// Procs reads /proc through runner/session, as the signals that made the
// fault did.
type Procs struct{}

// Session is session.Members.
func (Procs) Session(sid int) ([]session.Proc, error) { return session.Members(sid) }

// Proc is session.Stat, with a process that is gone reported as not found.
func (Procs) Proc(pid int) (session.Proc, bool, error) {
	p, err := session.Stat(pid)
	if errors.Is(err, os.ErrNotExist) {
		return session.Proc{}, false, nil
	}
	if err != nil {
		return session.Proc{}, false, err
	}
	return p, true, nil
}
