// Package session finds and signals the processes of one Linux session by
// reading /proc. Engines run in sessions of their own (Setsid), so "every
// process of an engine" is "every process whose session id is the engine's":
// that reaches vLLM's EngineCore child (or the simulator's core), which
// signalling the front end's pid alone would miss.
//
// Both the runner (stop, restart) and the fault package (stall, kill,
// remove) signal through Signal, so the guards live in one place.
package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Proc is one process as /proc/PID/stat shows it.
type Proc struct {
	Pid        int
	PPid       int
	Pgrp       int
	Sid        int
	State      byte   // R, S, D, T (stopped), t, Z (zombie), ...
	StartTicks uint64 // start time after boot in clock ticks: with Pid, the process's identity
	Comm       string
}

// Live reports whether the process still runs (or is stopped): a zombie has
// exited and only waits to be reaped.
func (p Proc) Live() bool { return p.State != 'Z' && p.State != 'X' }

// Stopped reports whether the process is stopped by a signal (state T).
func (p Proc) Stopped() bool { return p.State == 'T' }

// ErrNoMembers is returned by Signal when the session has no live process.
var ErrNoMembers = errors.New("no live process in the session")

// Stat reads /proc/PID/stat. A process that is gone gives an error wrapping
// os.ErrNotExist.
func Stat(pid int) (Proc, error) {
	var buf [1024]byte
	data, err := readSmall("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
	if err != nil {
		return Proc{}, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
	}
	p, err := parseStat(data)
	if err != nil {
		return Proc{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	p.Pid = pid
	return p, nil
}

// readSmall reads a small /proc file into buf with bare syscalls: a scan of
// /proc reads one stat file per process, for every signal and every poll,
// and os.ReadFile's stat and *os.File bookkeeping would dominate it.
func readSmall(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}

// parseStat parses the fields of /proc/PID/stat that identify a process and
// its session. It is hand-written rather than procfs's fmt.Fscan because
// every signal and every poll scans all of /proc.
func parseStat(data []byte) (Proc, error) {
	// comm may hold spaces and parentheses, so split at the last ')'.
	l := bytes.IndexByte(data, '(')
	r := bytes.LastIndexByte(data, ')')
	if l < 0 || r < l || r+2 > len(data) {
		return Proc{}, fmt.Errorf("no (comm) in %q", truncate(data))
	}
	f := bytes.Fields(data[r+1:])
	// After comm: state(0) ppid(1) pgrp(2) session(3) ... starttime(19).
	if len(f) < 20 || len(f[0]) != 1 {
		return Proc{}, fmt.Errorf("too few fields in %q", truncate(data))
	}
	var p Proc
	p.Comm = string(data[l+1 : r])
	p.State = f[0][0]
	ints := []*int{&p.PPid, &p.Pgrp, &p.Sid}
	for i, dst := range ints {
		v, err := strconv.Atoi(string(f[1+i]))
		if err != nil {
			return Proc{}, fmt.Errorf("field %d: %w", 4+i, err)
		}
		*dst = v
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return Proc{}, fmt.Errorf("starttime: %w", err)
	}
	p.StartTicks = st
	return p, nil
}

func truncate(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// Members returns every process of session sid, zombies included (check
// Live). Processes that end while /proc is read are skipped.
func Members(sid int) ([]Proc, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []Proc
	for _, n := range names {
		if n == "" || n[0] < '0' || n[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		p, err := Stat(pid)
		if err != nil || p.Sid != sid {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// Live returns the pids of the live (non-zombie) members of session sid.
func Live(sid int) ([]int, error) {
	ms, err := Members(sid)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range ms {
		if p.Live() {
			pids = append(pids, p.Pid)
		}
	}
	return pids, nil
}

// Guard returns an error when sid must never be signalled: session 0 (the
// kernel's threads), 1 (init's) and p2pfault's own session, which would stop
// or kill p2pfault itself and the terminal it runs in.
func Guard(sid int) error {
	if sid <= 1 {
		return fmt.Errorf("refusing to signal session %d: sessions 0 and 1 belong to the system", sid)
	}
	own, err := unix.Getsid(0)
	if err != nil {
		return fmt.Errorf("read p2pfault's own session: %w", err)
	}
	if sid == own {
		return fmt.Errorf("refusing to signal session %d: it is p2pfault's own session", sid)
	}
	return nil
}

// Signal sends sig to every live member of session sid and returns their
// pids. Members are found in /proc, never by name. Each one is opened as a
// pidfd and its session checked again before the signal, so a pid reused
// by an unrelated process between the scan and the signal is not hit.
func Signal(sid int, sig unix.Signal) ([]int, error) {
	if err := Guard(sid); err != nil {
		return nil, err
	}
	ms, err := Members(sid)
	if err != nil {
		return nil, fmt.Errorf("signal session %d with %v: %w", sid, sig, err)
	}
	return SignalMembers(sid, ms, sig)
}

// SignalMembers is Signal for members already read with Members(sid), so a
// caller that inspects them first does not scan /proc twice.
func SignalMembers(sid int, ms []Proc, sig unix.Signal) ([]int, error) {
	if err := Guard(sid); err != nil {
		return nil, err
	}
	return signalMembers(sid, ms, sig)
}

// signalMembers is SignalMembers once the caller has run the guard.
func signalMembers(sid int, ms []Proc, sig unix.Signal) ([]int, error) {
	var sent []int
	var errs []error
	for _, p := range ms {
		if !p.Live() || p.Sid != sid {
			continue
		}
		ok, err := signalOne(p, sig)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			sent = append(sent, p.Pid)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return sent, fmt.Errorf("signal session %d with %v: %w", sid, sig, err)
	}
	if len(sent) == 0 {
		return nil, fmt.Errorf("signal session %d with %v: %w", sid, sig, ErrNoMembers)
	}
	return sent, nil
}

// signalOne signals p if it is still the process that was scanned. It
// reports false when the process went away in between.
func signalOne(p Proc, sig unix.Signal) (bool, error) {
	fd, err := unix.PidfdOpen(p.Pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return false, nil
	case errors.Is(err, unix.ENOSYS):
		// Kernels before 5.3 have no pidfd: fall back to kill after the
		// identity check, with the small reuse window that leaves.
		fd = -1
	case err != nil:
		return false, fmt.Errorf("pidfd_open %d: %w", p.Pid, err)
	}
	if fd >= 0 {
		defer unix.Close(fd)
	}
	now, err := Stat(p.Pid)
	if err != nil || now.Sid != p.Sid || now.StartTicks != p.StartTicks || !now.Live() {
		return false, nil
	}
	if fd >= 0 {
		err = unix.PidfdSendSignal(fd, sig, nil, 0)
	} else {
		err = unix.Kill(p.Pid, sig)
	}
	if errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("send %v to pid %d: %w", sig, p.Pid, err)
	}
	return true, nil
}

// WaitGone polls until session sid has no live member, or ctx ends.
func WaitGone(ctx context.Context, sid int, poll time.Duration) error {
	for {
		live, err := Live(sid)
		if err != nil {
			return err
		}
		if len(live) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("session %d still has live processes %v: %w", sid, live, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// WaitStates polls until every pid in pids is gone or satisfies want, or ctx
// ends. Signals are delivered asynchronously: a SIGSTOPped process shows T
// only once the kernel has stopped all its threads.
func WaitStates(ctx context.Context, pids []int, want func(Proc) bool, poll time.Duration) error {
	pending := append([]int(nil), pids...)
	for {
		next := pending[:0]
		for _, pid := range pending {
			p, err := Stat(pid)
			if err != nil || !p.Live() || want(p) {
				continue
			}
			next = append(next, pid)
		}
		pending = next
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pids %v did not reach the wanted state: %w", pending, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// StopWait bounds the wait for /proc to show that a stop or a continue
// took effect: a SIGSTOPped process shows T only once the kernel has
// stopped every one of its threads.
const StopWait = 5 * time.Second

// stopPoll is how often /proc is read while a stop or continue is
// confirmed: a stall is timed from the signal, so the wait is short.
const stopPoll = 500 * time.Microsecond

// Stop stalls session sid: it SIGSTOPs every live member of ms (the
// session as Members(sid) read it, so a caller may record the members
// first) and returns once /proc shows all of them stopped, with when the
// signal was sent and the pids it reached. A live member already stopped
// is an error: a stall p2pfault did not make, whose end it could not
// tell. When not every member stops within StopWait (or ctx ends first),
// the session is continued again and the error says which did not: a
// stall is whole or not at all. The runner and attach both stall through
// it, and its guard is the one a stall runs.
func Stop(ctx context.Context, sid int, ms []Proc) (time.Time, []int, error) {
	if err := Guard(sid); err != nil {
		return time.Time{}, nil, err
	}
	for _, m := range ms {
		if m.Live() && m.Sid == sid && m.Stopped() {
			return time.Time{}, nil, fmt.Errorf("pid %d of session %d is already stopped", m.Pid, sid)
		}
	}
	at := time.Now()
	pids, err := signalMembers(sid, ms, unix.SIGSTOP)
	if err != nil {
		if len(pids) > 0 {
			_, _ = Signal(sid, unix.SIGCONT)
		}
		return at, pids, err
	}
	wctx, cancel := context.WithTimeout(ctx, StopWait)
	defer cancel()
	if err := WaitStates(wctx, pids, Proc.Stopped, stopPoll); err != nil {
		_, _ = Signal(sid, unix.SIGCONT)
		return at, pids, fmt.Errorf("session %d: %w", sid, err)
	}
	return at, pids, nil
}

// WaitContinued waits until none of pids is stopped any more (a SIGCONT
// sent to them took effect), within StopWait or until ctx ends.
func WaitContinued(ctx context.Context, pids []int) error {
	wctx, cancel := context.WithTimeout(ctx, StopWait)
	defer cancel()
	return WaitStates(wctx, pids, func(p Proc) bool { return !p.Stopped() }, stopPoll)
}

// Descendants are the live members of ms (a session as Members read it)
// that are one of roots or descend from one: a process and its children,
// without its parent or siblings (one data-parallel rank's engine core and
// its own workers, never the front end or a sibling core).
func Descendants(ms []Proc, roots ...int) []Proc {
	in := map[int]bool{}
	for _, p := range roots {
		in[p] = true
	}
	// A member whose parent is in the set joins it, until nothing changes
	// (a process tree is a handful of members deep).
	for changed := true; changed; {
		changed = false
		for _, m := range ms {
			if m.Live() && !in[m.Pid] && in[m.PPid] {
				in[m.Pid], changed = true, true
			}
		}
	}
	var out []Proc
	for _, m := range ms {
		if m.Live() && in[m.Pid] {
			out = append(out, m)
		}
	}
	return out
}

// Cmdline reads /proc/PID/cmdline as argv (empty for a kernel thread or a
// zombie). A process that is gone gives an error wrapping os.ErrNotExist.
func Cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	s := strings.TrimRight(string(b), "\x00")
	if s == "" {
		return nil, nil
	}
	return strings.Split(s, "\x00"), nil
}
