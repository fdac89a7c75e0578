package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"p2pfault/exitcode"
	"p2pfault/sim/engine"
	"p2pfault/sim/link"
	"p2pfault/sim/simlog"
)

// coreConfig is what the front end hands its engine-core child (as JSON in
// the hidden `sim core --config` flag; the rank is its own flag).
type coreConfig struct {
	Engine       engine.Config `json:"engine"`
	StartupDelay time.Duration `json:"startup_delay"`
	Rank         int           `json:"-"` // data-parallel rank
}

// coreRankFlag carries an engine core's data-parallel rank on its command
// line (`sim core --data-parallel-rank R --config ...`), so a tool finds
// rank R's process by its /proc/PID/cmdline.
const coreRankFlag = "--data-parallel-rank"

// linkFD is the core's end of the socketpair: the first of cmd.ExtraFiles.
const linkFD = 3

// linkFlush bounds how long a stopping core waits to tell its front end.
const linkFlush = time.Second

func runCoreProcess(ctx context.Context, configJSON string, rank int, log *simlog.Logger) error {
	var cfg coreConfig
	if err := json.Unmarshal([]byte(configJSON), &cfg); err != nil {
		return exitcode.Usagef("sim core --config: %v", err)
	}
	if rank < 0 {
		return exitcode.Usagef("sim core %s %d: must not be negative", coreRankFlag, rank)
	}
	cfg.Rank = rank
	f := os.NewFile(linkFD, "link")
	if f == nil {
		return exitcode.Usagef("sim core: no link on fd %d (the core is started by `sim serve`)", linkFD)
	}
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return exitcode.Usagef("sim core: link on fd %d: %v (the core is started by `sim serve`)", linkFD, err)
	}
	return runCore(ctx, cfg, conn, log)
}

// runCore is the engine-core process: it loads the "model", binds P2P,
// tells the front end it is ready and runs the engine until ctx ends (a
// signal) or the link to the front end closes.
func runCore(ctx context.Context, cfg coreConfig, rw io.ReadWriteCloser, log *simlog.Logger) error {
	l := link.New(rw)
	linkCtx, linkGone := context.WithCancel(ctx)
	defer linkGone()
	msgs := make(chan link.Msg, 64)
	go func() {
		defer close(msgs)
		defer linkGone() // the front end is gone: so is the core
		for {
			m, err := l.Recv()
			if err != nil {
				return
			}
			select {
			case msgs <- m:
			case <-linkCtx.Done():
				return
			}
		}
	}()

	log.Info(compEngine, "%s: loading model %s (simulated: %s)", coreName(cfg.Rank), cfg.Engine.Model, cfg.StartupDelay)
	if cfg.StartupDelay > 0 {
		t := time.NewTimer(cfg.StartupDelay)
		select {
		case <-t.C:
			if g := cfg.Engine.Gate; g != nil {
				g() // a frozen in-process core loads on at its thaw
			}
		case <-linkCtx.Done():
			t.Stop()
			return stopCore(ctx, l, log)
		}
	}
	e, err := engine.New(cfg.Engine, log)
	if err == nil {
		err = e.Listen()
	}
	if err != nil {
		log.Error(compEngine, "engine core failed to start: %v", err)
		_ = l.Send(link.Msg{Type: link.TypeFatal, Message: err.Error()})
		_ = l.Flush(linkFlush)
		return &exitcode.Error{Code: exitcode.Failed, Err: err}
	}
	if err := l.Send(link.Msg{Type: link.TypeReady, P2PID: e.ID()}); err != nil {
		return &exitcode.Error{Code: exitcode.Failed, Err: fmt.Errorf("tell the front end the core is ready: %w", err)}
	}
	go func() {
		for m := range msgs {
			switch m.Type {
			case link.TypeSubmit:
				id := m.ID
				e.Submit(id, engine.Request{Tokens: m.Tokens, CacheSalt: m.CacheSalt, MaxTokens: m.MaxTokens, Source: m.Source,
					RemoteDecoder: m.Decoder, Hooks: linkHooks(l, id, m.Stream)},
					func(res engine.Result) { _ = l.Send(resultMsg(id, res)) })
			case link.TypeCancel:
				e.Cancel(m.ID)
			}
		}
	}()
	// vLLM's core sends its SchedulerStats to the API server with its
	// outputs; the front end sets the queue gauges of /metrics from them.
	var last atomic.Pointer[engine.Queues]
	e.OnQueues(func(q engine.Queues) {
		last.Store(&q)
		_ = l.Send(link.Msg{Type: link.TypeQueues, Queues: &q})
	})
	go republishQueues(linkCtx, l, &last, cfg.Engine.Gate)
	if err := e.Run(linkCtx); err != nil {
		return &exitcode.Error{Code: exitcode.Failed, Err: err}
	}
	return stopCore(ctx, l, log)
}

// queuesRepublish is how often the core reports its queues even when they
// have not changed: vLLM's DP front end gets each engine's counts from the
// coordinator "every 100ms" (core_client.py, DPLBAsyncMPClient), which is
// what resets the balancer's own increments (balance.go).
const queuesRepublish = 100 * time.Millisecond

// republishQueues sends the last queues every queuesRepublish until ctx
// ends; a frozen in-process core (gate) sends nothing.
func republishQueues(ctx context.Context, l *link.Conn, last *atomic.Pointer[engine.Queues], gate func()) {
	t := time.NewTicker(queuesRepublish)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if gate != nil {
				gate()
			}
			if q := last.Load(); q != nil {
				_ = l.Send(link.Msg{Type: link.TypeQueues, Queues: q})
			}
		}
	}
}

// stopCore ends the link: on a signal the front end is told first, so it
// exits cleanly rather than report a dead core.
func stopCore(ctx context.Context, l *link.Conn, log *simlog.Logger) error {
	if ctx.Err() != nil {
		log.Info(compEngine, "engine core shutting down on signal%s", signalNamed(ctx))
		_ = l.Send(link.Msg{Type: link.TypeShutdown, Message: "engine core received a termination signal"})
	} else {
		log.Info(compEngine, "front end closed the link: engine core shutting down")
	}
	_ = l.Flush(linkFlush)
	return nil
}

// linkHooks forwards a request's tokens (when streamed) and its abort to the
// front end, which counts aborted requests in /metrics as vLLM does.
func linkHooks(l *link.Conn, id uint64, stream bool) *engine.Hooks {
	h := &engine.Hooks{Aborted: func(st engine.Stats, tokens int) {
		_ = l.Send(link.Msg{Type: link.TypeAborted, ID: id, Stats: st, N: tokens})
	}}
	if stream {
		h.Decoding = func(kv uint64) { _ = l.Send(link.Msg{Type: link.TypeDecoding, ID: id, KV: kv}) }
		h.Token = func(n int) { _ = l.Send(link.Msg{Type: link.TypeToken, ID: id, N: n}) }
	}
	return h
}
