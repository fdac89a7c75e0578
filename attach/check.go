package attach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"time"

	"p2pfault/exitcode"
)

// Check checks an attached cluster before a run, so that a bad setup is an
// exit 2 rather than a failed fault halfway through: every URL answers
// /health; every source's P2P address has a listener (through /proc for a
// local source, a TCP connect for others); a local source's process is
// found, in a session p2pfault may signal and shared with no other engine
// of the file; every command's program is found. It returns every problem
// at once, each naming the source (or the decoder) and what is wrong.
func Check(ctx context.Context, f *File, opts Options) error {
	opts = opts.withDefaults()
	var errs []error
	bad := func(who, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", who, fmt.Sprintf(format, a...)))
	}
	unfaulted := len(f.Decoders) == 0 // `decoders:` entries are checked as sources are (below)
	if err := health(ctx, opts, f.Decoder.URL); unfaulted && err != nil {
		bad("decoder", "%s unreachable: %v", f.Decoder.URL, err)
	}
	// Which engine each local session holds: a session shared by two
	// engines would be stalled or killed together.
	owners := map[int][]string{}
	own := func(sid int, who string) {
		for _, w := range owners[sid] {
			if w == who {
				return
			}
		}
		owners[sid] = append(owners[sid], who)
	}
	if unfaulted && isLoopback(f.Decoder.Host) {
		if l, err := FindListener(f.Decoder.Host, f.Decoder.Port); err == nil {
			own(l.Sid, "decoder")
		}
	}
	for _, s := range slices.Concat(f.Sources, f.Decoders) {
		who := s.Name
		if err := health(ctx, opts, s.URL); err != nil {
			bad(who, "%s unreachable: %v", s.URL, err)
		}
		if s.Faults.Local {
			l, err := FindListener(s.P2PHost, s.P2PPort)
			switch {
			case errors.Is(err, ErrNobodyListens):
				bad(who, "P2P address %s: nobody listens on this host", s.P2P)
				continue
			case errors.Is(err, ErrOwnerHidden):
				bad(who, "local faults: the process listening on P2P address %s cannot be found in /proc (another user's or another PID namespace's process?); run p2pfault as its user, or give commands", s.P2P)
				continue
			case err != nil:
				bad(who, "local faults: %v", err)
				continue
			}
			if err := ownSession(l); err != nil {
				bad(who, "local faults: pid %d (%s) on P2P address %s: %v; start the engine in a session of its own (setsid)", l.Pid, l.Comm, s.P2P, err)
				continue
			}
			own(l.Sid, who)
			// The HTTP side must be the same engine: stalling the P2P
			// side's session alone would leave its front end answering.
			if hl, err := FindListener(s.Host, s.Port); err == nil && hl.Sid != l.Sid {
				bad(who, "local faults: HTTP port %d is served by pid %d in session %d but P2P address %s by pid %d in session %d; local faults act on one session", s.Port, hl.Pid, hl.Sid, s.P2P, l.Pid, l.Sid)
			}
			continue
		}
		if err := dial(ctx, s.P2P, opts.HealthTimeout); err != nil {
			bad(who, "P2P address %s: nobody listens (%v)", s.P2P, err)
		}
		for _, a := range Actions() {
			argv, ok := s.Faults.Commands[a]
			if !ok {
				continue
			}
			if _, err := exec.LookPath(argv[0]); err != nil {
				bad(who, "%s command: %q not found: %v", a, argv[0], unwrapExec(err))
			}
		}
	}
	for sid, who := range owners {
		if len(who) > 1 {
			bad(strings.Join(who, " and "), "share session %d (started together, e.g. by one script): a local fault of one would hit all of them; start each engine in a session of its own (setsid) or give commands", sid)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return exitcode.AsUsage(fmt.Errorf("attach %s:\n  %w", f.Path, joinIndented(errs)))
}

func dial(ctx context.Context, addr string, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

func unwrapExec(err error) error {
	var e *exec.Error
	if errors.As(err, &e) {
		return e.Err
	}
	return err
}

// joinIndented joins errors one per line, indented under a heading.
func joinIndented(errs []error) error {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString(e.Error())
	}
	return &joined{msg: b.String(), errs: errs}
}

type joined struct {
	msg  string
	errs []error
}

func (j *joined) Error() string   { return j.msg }
func (j *joined) Unwrap() []error { return j.errs }
