package fault

import (
	"context"

	"p2pfault/verify"
)

// Host is what the host shows of a target, for verification: its session
// and members as /proc lists them, the addresses it listens on, and how
// to ask it whether it is ready.
type Host struct {
	Sid   int
	Pids  []int
	Addrs []string // "host:port": its HTTP and P2P listeners
	// Ready asks the engine once whether it is ready (GET /health
	// answering 200): nil when it is. The target brings it, so fault
	// itself makes no request.
	Ready func(ctx context.Context) error
}

// Inspectable is a Target whose processes p2pfault can read on this host:
// the engines it launched, and an attached engine faulted locally whose
// process is found. Host says what the host shows now; ok is false when
// it cannot be read (a kind's Verify is then skipped: there is nothing it
// could read).
type Inspectable interface {
	Host() (h Host, ok bool)
}

func host(t Target) (Host, bool) {
	in, ok := t.(Inspectable)
	if !ok {
		return Host{}, false
	}
	return in.Host()
}

func effect(r verify.Result) Effect {
	return Effect{OK: r.OK, After: r.After, Detail: r.Detail}
}

// verifyStall: every live member of the session is in state T.
func verifyStall(f *Fire) Effect {
	h, ok := host(f.Target)
	if !ok {
		return Effect{Skipped: true}
	}
	return effect(f.Verifier.Stall(f.Env.Context(), h.Sid))
}

// verifyResume: no member of the session is in state T any more.
func verifyResume(f *Fire) Effect {
	h, ok := host(f.Target)
	if !ok {
		return Effect{Skipped: true}
	}
	return effect(f.Verifier.Resume(f.Env.Context(), h.Sid))
}

// verifyKill waits for the restart Act started, then verifies every pid
// of the old session is gone and the new session answers its health
// check: timed from the restart's ready (a real engine's restart takes as
// long as loading its model, which says nothing of the kill).
func verifyKill(f *Fire) Effect {
	if !f.hasHost || f.restart == nil {
		return Effect{Skipped: true}
	}
	select {
	case err := <-f.restart:
		if err != nil {
			return Effect{Detail: "the restart failed: " + err.Error()}
		}
	case <-f.Env.Context().Done():
		return Effect{Detail: "the run ended before the restarted source was ready"}
	}
	now, _ := host(f.Target)
	return effect(f.Verifier.Kill(f.Env.Context(), f.before.Sid, f.before.Pids, now.Ready))
}

// verifyRemove: the source's ports refuse connections.
func verifyRemove(f *Fire) Effect {
	if !f.hasHost {
		return Effect{Skipped: true}
	}
	return effect(f.Verifier.Remove(f.Env.Context(), f.before.Addrs...))
}
