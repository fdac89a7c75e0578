package probe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"p2pfault/event"
)

// errWarmupDeadline is the cause of requests cut by the warm-up deadline.
var errWarmupDeadline = errors.New("warm-up deadline passed")

// Warmup handshakes every source's P2P session before t0: for all sources in
// parallel it repeats seed + pull, one attempt every Interval, until a pull
// naming the source hits. The first pull to a peer pays the session setup;
// measuring it would count that cost as a fault. A source of several
// data-parallel ranks is warmed on each rank (each has its own P2P port, so
// its own session). It returns nil when every source hit within timeout; else one error per source that did not, naming
// it and its last failure, wrapping context.DeadlineExceeded (or ctx's error
// when ctx ended first).
func (p *Prober) Warmup(ctx context.Context, timeout time.Duration) error {
	if timeout <= 0 {
		return fmt.Errorf("probe: warm-up timeout %s is not positive", timeout)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := time.AfterFunc(timeout, func() { cancel(errWarmupDeadline) })
	defer deadline.Stop()
	stop := context.AfterFunc(p.abortCtx, func() { cancel(context.Cause(p.abortCtx)) })
	defer stop()

	t0 := time.Now()
	// One slot per source, rank and decoder, in that order, so the joined
	// error reads the same whichever warm-up ends first: every pair the
	// run probes is engaged before t0.
	var legs []pair
	for i, s := range p.cfg.Sources {
		for r := range s.rankCount() {
			for d := range p.cfg.DecoderURLs {
				legs = append(legs, pair{i, r, d})
			}
		}
	}
	errs := make([]error, len(legs))
	var wg sync.WaitGroup
	for n, l := range legs {
		wg.Go(func() { errs[n] = p.warmSource(wctx, t0, l, timeout) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// NotWarm is a source whose pulls never hit in the warm-up: its error
// names it and its last failure; Last is that attempt's outcome, for the
// experiment's gate (package cause) to name why.
type NotWarm struct {
	Source int
	Peer   string // the P2P address its pulls named
	Last   event.Sample
	msg    string
	err    error
}

func (n *NotWarm) Error() string { return n.msg }
func (n *NotWarm) Unwrap() error { return n.err }

// NotWarmOf is every NotWarm in err (Warmup's joined errors).
func NotWarmOf(err error) []*NotWarm {
	if nw, ok := err.(*NotWarm); ok {
		return []*NotWarm{nw}
	}
	var out []*NotWarm
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, NotWarmOf(e)...)
		}
	}
	return out
}

func (p *Prober) warmSource(ctx context.Context, t0 time.Time, l pair, timeout time.Duration) error {
	a, rank := p.address(l.i), l.rank
	name := fmt.Sprintf("source %d (P2P %s)", a.src.Index, a.peers[rank])
	if len(a.peers) > 1 {
		name = fmt.Sprintf("source %d rank %d (P2P %s)", a.src.Index, rank, a.peers[rank])
	}
	if len(p.cfg.DecoderURLs) > 1 {
		name += fmt.Sprintf(" through decoder %d", l.decoder)
	}
	wait := time.NewTimer(time.Hour)
	defer wait.Stop()
	var last string
	var lastSample event.Sample
	for attempt := 1; ; attempt++ {
		s, info := p.trial(ctx, t0, l, int64(attempt), nil)
		if s.Hit() {
			return nil
		}
		if ctx.Err() == nil || last == "" {
			last, lastSample = lastFailure(s, info), s
		}
		wait.Reset(p.cfg.Interval)
		select {
		case <-wait.C:
			continue
		case <-ctx.Done():
		}
		// The caller says "warm-up"; each line names the source it is about.
		nw := &NotWarm{Source: a.src.Index, Peer: a.peers[rank], Last: lastSample}
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errWarmupDeadline):
			nw.msg = fmt.Sprintf("%s not handshaken within %s (%s); last: %s", name, timeout, attempts(attempt), last)
			nw.err = context.DeadlineExceeded
		default:
			nw.msg = fmt.Sprintf("%s not handshaken: stopped after %s (last: %s): %v", name, attempts(attempt), last, cause)
			nw.err = cause
		}
		return nw
	}
}

// lastFailure says why a warm-up attempt did not count as a hit.
func lastFailure(s event.Sample, info pullInfo) string {
	var msg string
	switch {
	case s.Err != "":
		msg = "pull failed: " + s.Err
	case info.noDetails:
		msg = fmt.Sprintf("pull answered %d without usage.prompt_tokens_details.cached_tokens "+
			"(is the decoder started with --enable-prompt-tokens-details?)", s.Status)
	default:
		msg = fmt.Sprintf("pull answered %d with cached_tokens %d", s.Status, s.CachedTokens)
	}
	if s.SeedErr != "" {
		msg += " after the seed failed: " + s.SeedErr
	}
	return msg
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}
