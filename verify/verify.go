// Package verify confirms on the host that a fault action took effect,
// rather than assuming it (a signal sent to the wrong session, or to one
// whose members were already gone, does nothing and says nothing): a stall
// shows as every member of the session in state T, a resume as none, a
// kill as every pid of the old session gone and the new session ready, a
// remove as the source's ports refusing connections. Each check polls up to
// a deadline and returns what it saw. It knows nothing of fault kinds'
// registry; the kind's verify step calls it.
package verify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"p2pfault/runner/session"
)

// Defaults of Verifier.
const (
	DefaultDeadline = 2 * time.Second
	DefaultPoll     = 20 * time.Millisecond
)

// Result is what a verification saw.
type Result struct {
	Kind   string        `json:"kind"` // stall, resume, kill, remove
	OK     bool          `json:"ok"`   // the effect was seen before the deadline
	After  time.Duration `json:"after_ns"`
	Detail string        `json:"detail"` // what was seen last, e.g. "2 of 2 processes of session 4242 in state T"
}

// Verifier polls for a fault's effect. The zero value reads /proc, polls
// every 20 ms and gives up after 2 s.
type Verifier struct {
	Procs    Reader        // nil: /proc (Procs)
	Deadline time.Duration // from the call; 0: DefaultDeadline
	Poll     time.Duration // 0: DefaultPoll
	// Dial connects for Remove, Partitioned and Reachable; nil: a
	// net.Dialer (a virtual cluster's checks dial its in-memory network).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (v Verifier) reader() (Reader, error) {
	if v.Procs != nil {
		return v.Procs, nil
	}
	return Procs{}, nil
}

// members are session sid's processes, as the Reader reads them.
func (v Verifier) members(sid int) ([]session.Proc, error) {
	r, err := v.reader()
	if err != nil {
		return nil, err
	}
	return r.Session(sid)
}

// Until polls probe as every check here does (every Poll, up to the
// Deadline) until it reports done: for a target that reports its own state
// rather than showing it in /proc (a virtual cluster's engine), whose
// effect is checked by what it says. kind names the Result.
func (v Verifier) Until(ctx context.Context, kind string, probe func(ctx context.Context) (done bool, detail string)) Result {
	return v.poll(ctx, kind, probe)
}

// dial is v.Dial, or the OS's.
func (v Verifier) dial() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if v.Dial != nil {
		return v.Dial
	}
	return (&net.Dialer{}).DialContext
}

// poll calls probe until it reports done, ctx ends or the deadline passes.
func (v Verifier) poll(ctx context.Context, kind string, probe func(ctx context.Context) (done bool, detail string)) Result {
	deadline := v.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	every := v.Poll
	if every <= 0 {
		every = DefaultPoll
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	t := time.NewTimer(0)
	defer t.Stop()
	var detail string
	for {
		select {
		case <-ctx.Done():
			why := fmt.Sprintf("not seen within %s", deadline)
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why = "verification cut short"
			}
			return Result{Kind: kind, After: time.Since(start), Detail: why + ": " + detail}
		case <-t.C:
		}
		done, d := probe(ctx)
		if done {
			return Result{Kind: kind, OK: true, After: time.Since(start), Detail: d}
		}
		// A round the deadline cut short says only that it was cut (every
		// dial "i/o timeout"): the last whole round tells more.
		if ctx.Err() == nil || detail == "" {
			detail = d
		}
		t.Reset(every)
	}
}

// Stall verifies that every live member of session sid is stopped (state
// T). A session with no live member is not stalled: nothing was stopped.
func (v Verifier) Stall(ctx context.Context, sid int) Result {
	return v.poll(ctx, "stall", func(context.Context) (bool, string) {
		return v.sessionState(sid, true)
	})
}

// Resume verifies that no live member of session sid is stopped any more.
func (v Verifier) Resume(ctx context.Context, sid int) Result {
	return v.poll(ctx, "resume", func(context.Context) (bool, string) {
		return v.sessionState(sid, false)
	})
}

func (v Verifier) sessionState(sid int, wantStopped bool) (bool, string) {
	ms, err := v.members(sid)
	if err != nil {
		return false, err.Error()
	}
	var live, stopped int
	var other []string
	var stoppedPids []int
	for _, p := range ms {
		if !p.Live() {
			continue
		}
		live++
		if p.Stopped() {
			stopped++
			stoppedPids = append(stoppedPids, p.Pid)
		} else {
			other = append(other, fmt.Sprintf("pid %d in state %c", p.Pid, p.State))
		}
	}
	if live == 0 {
		return false, fmt.Sprintf("session %d has no live process", sid)
	}
	if wantStopped {
		if stopped == live {
			// The pids name exactly what was stopped (fault_took_effect's words).
			return true, fmt.Sprintf("%d of %d processes of session %d in state T (pids %s)", stopped, live, sid, joinInts(stoppedPids))
		}
		return false, fmt.Sprintf("%d of %d processes of session %d in state T (%s)", stopped, live, sid, strings.Join(other, ", "))
	}
	if stopped == 0 {
		return true, fmt.Sprintf("none of %d processes of session %d in state T", live, sid)
	}
	return false, fmt.Sprintf("%d of %d processes of session %d still in state T", stopped, live, sid)
}

// Kill verifies that every pid of the old session (oldSid, oldPids: its
// members before the kill) is gone, a zombie, or another session's, and
// then that ready (the restarted engine's readiness probe, e.g. GET
// /health) returns nil. ready is called once per poll with the remaining
// deadline; nil ready checks only that the old session is gone. A restart
// slower than the deadline (a real vLLM loading its model) should be
// verified with a Verifier of a longer Deadline, or once it reported ready.
func (v Verifier) Kill(ctx context.Context, oldSid int, oldPids []int, ready func(context.Context) error) Result {
	return v.poll(ctx, "kill", func(ctx context.Context) (bool, string) {
		r, err := v.reader()
		if err != nil {
			return false, err.Error()
		}
		var alive []string
		for _, pid := range oldPids {
			p, ok, err := r.Proc(pid)
			if err != nil {
				return false, err.Error()
			}
			if ok && p.Live() && p.Sid == oldSid {
				alive = append(alive, fmt.Sprintf("pid %d (state %c)", pid, p.State))
			}
		}
		if len(alive) > 0 {
			return false, fmt.Sprintf("%d of %d processes of old session %d still alive: %s", len(alive), len(oldPids), oldSid, strings.Join(alive, ", "))
		}
		gone := fmt.Sprintf("all %d processes of old session %d gone", len(oldPids), oldSid)
		if ready == nil {
			return true, gone
		}
		if err := ready(ctx); err != nil {
			return false, gone + "; new session not ready: " + err.Error()
		}
		return true, gone + "; new session ready"
	})
}

// Remove verifies that every address ("host:port": the source's HTTP and
// P2P ports) refuses connections. A port that accepts, or a connect that
// times out (a stopped process's listen backlog), is not removed.
func (v Verifier) Remove(ctx context.Context, addrs ...string) Result {
	dial := v.dial()
	return v.poll(ctx, "remove", func(ctx context.Context) (bool, string) {
		var open []string
		for _, a := range addrs {
			dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			c, err := dial(dctx, "tcp", a)
			cancel()
			switch {
			case err == nil:
				c.Close()
				open = append(open, a+" accepts connections")
			case !errors.Is(err, syscall.ECONNREFUSED):
				open = append(open, fmt.Sprintf("%s does not refuse: %v", a, err))
			}
		}
		if len(addrs) == 0 {
			return false, "no address to check"
		}
		if len(open) > 0 {
			return false, strings.Join(open, "; ")
		}
		return true, fmt.Sprintf("%s refuse connections", strings.Join(addrs, ", "))
	})
}

// StallPart verifies a stall of part of session sid (one data-parallel
// rank's engine core): every pid of part is stopped and every other live
// member of the session is not, so the detail names exactly the processes
// stopped and those left running.
func (v Verifier) StallPart(ctx context.Context, sid int, part []int) Result {
	return v.poll(ctx, "stall", func(context.Context) (bool, string) {
		return v.partState(sid, part, true)
	})
}

// ResumePart verifies the resume of a StallPart: no pid of part is
// stopped any more.
func (v Verifier) ResumePart(ctx context.Context, sid int, part []int) Result {
	return v.poll(ctx, "resume", func(context.Context) (bool, string) {
		return v.partState(sid, part, false)
	})
}

func (v Verifier) partState(sid int, part []int, wantStopped bool) (bool, string) {
	ms, err := v.members(sid)
	if err != nil {
		return false, err.Error()
	}
	in := map[int]bool{}
	for _, pid := range part {
		in[pid] = true
	}
	var stopped, running []int
	var wrong []string
	for _, p := range ms {
		if !p.Live() {
			continue
		}
		if p.Stopped() {
			stopped = append(stopped, p.Pid)
		} else {
			running = append(running, p.Pid)
		}
		bad := in[p.Pid] && p.Stopped() // a resume: the part still stopped
		if wantStopped {
			bad = in[p.Pid] != p.Stopped() // a stall: the part stopped, the rest not
		}
		if bad {
			wrong = append(wrong, fmt.Sprintf("pid %d in state %c", p.Pid, p.State))
		}
	}
	if len(stopped)+len(running) == 0 {
		return false, fmt.Sprintf("session %d has no live process", sid)
	}
	seen := fmt.Sprintf("session %d: stopped (state T) pids [%s], running pids [%s]",
		sid, joinInts(stopped), joinInts(running))
	if !wantStopped {
		seen = fmt.Sprintf("session %d: pids [%s] of the stalled part run again; stopped pids [%s]",
			sid, joinInts(part), joinInts(stopped))
	}
	if len(wrong) > 0 {
		return false, seen + " (" + strings.Join(wrong, ", ") + ")"
	}
	return true, seen
}

// joinInts renders pids in order, so a detail does not vary with /proc's.
func joinInts(xs []int) string {
	xs = slices.Sorted(slices.Values(xs))
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, " ")
}
