package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"p2pfault/enginehealth"
	"p2pfault/event"
	"p2pfault/runner/session"
)

// healthClient asks /health: a short timeout, and no connection kept, so
// a restarted engine is asked on a connection of its own.
func healthClient() *http.Client {
	return &http.Client{Timeout: HealthTimeout, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}
}

// health asks the engine's GET /health once: nil when it answers 200.
func (e *Engine) health(ctx context.Context, client *http.Client) error {
	return enginehealth.Ask(ctx, client, e.HTTPURL())
}

// Healthy asks the engine once whether it is ready (GET /health answers
// 200), for whoever verifies a restart on the host.
func (e *Engine) Healthy(ctx context.Context) error { return e.health(ctx, healthClient()) }

// healthPoll is how often /health is asked while an engine starts.
const healthPoll = 50 * time.Millisecond

func (e *Engine) waitReady(ctx context.Context, p *process) error {
	timeout := e.c.cfg.ReadyTimeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := healthClient()
	var last error
	for {
		last = e.health(ctx, client)
		if last == nil && !p.reaped() {
			e.markReady(p)
			return nil
		}
		select {
		case <-p.done:
			return e.startError(p, fmt.Errorf("exited with %s before it was ready", p.exit))
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return e.startError(p, fmt.Errorf("not ready after %v (last: %v)", timeout, last))
			}
			return e.startError(p, fmt.Errorf("start interrupted: %w", context.Cause(ctx)))
		case <-time.After(healthPoll):
		}
	}
}

func (e *Engine) markReady(p *process) {
	var members []ProcID
	if ms, err := session.Members(p.sid); err == nil {
		for _, m := range ms {
			if m.Live() {
				members = append(members, ProcID{Pid: m.Pid, StartTicks: m.StartTicks})
			}
		}
	}
	cmdlines := ReadCmdlines(pidsOf(members)...)
	e.mu.Lock()
	p.readyAt, p.members, p.cmdlines = time.Now(), members, p.cmdlines.with(cmdlines)
	if e.proc == p && e.state == event.StateStarting {
		e.changeLocked(event.StateReady)
	}
	e.mu.Unlock()
	_ = e.c.writeSessions()
}

// startError names the engine, what went wrong and its last log lines.
func (e *Engine) startError(p *process, err error) error {
	// The last lines may still be in the pipe when the process exits.
	select {
	case <-p.logsDone:
	case <-time.After(time.Second):
	}
	lines := e.tail.last(20)
	if len(lines) == 0 {
		return fmt.Errorf("%s (pid %d): %w; it printed nothing (log %s)", e.spec.Name, p.pid, err, e.LogPath())
	}
	return fmt.Errorf("%s (pid %d): %w; last log lines (all in %s):\n    %s",
		e.spec.Name, p.pid, err, e.LogPath(), strings.Join(lines, "\n    "))
}

// EndFunc ends a session: it signals the session sid (session.Signal
// with SIGKILL, for example). The runner then waits for every process of
// the session to be gone, and sends SIGKILL itself after the grace.
