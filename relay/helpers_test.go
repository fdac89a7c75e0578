package relay

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"p2pfault/internal/syncbuf"
	"p2pfault/memnet"
	"p2pfault/sim/engine"
	"p2pfault/sim/kv"
	"p2pfault/sim/simlog"
)

// simConfig is a fast sim engine (sim/engine's test configuration):
// timeouts in the hundreds of milliseconds.
func simConfig() engine.Config {
	return engine.Config{
		Model: "m", BlockSize: 16, TPSize: 1, KVBytesPerToken: 1024, HashSeed: "42",
		GPUBlocks: 256, CPUBlocks: 1024, P2P: true, P2PHost: "127.0.0.1",
		HandshakeTimeout: 600 * time.Millisecond, LookupTimeout: 150 * time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 400 * time.Millisecond,
		LookupHold: 500 * time.Millisecond, LoadTimeout: 300 * time.Millisecond,
		AbortAckTimeout: 100 * time.Millisecond, TransferBandwidth: 10e9,
		Tick: 2 * time.Millisecond, FreezeGap: 100 * time.Millisecond, StaleRoute: true,
	}
}

// simEngine is a sim engine core on a memnet host of its own, stepped by
// a goroutine that passes the host's gate, so a frozen host stops it as
// SIGSTOP stops a process.
type simEngine struct {
	*engine.Engine
	host *memnet.Host
	log  *syncbuf.Buffer
	ids  atomic.Uint64
}

var hostSeq atomic.Uint64

func startSim(t *testing.T, fab *memnet.Fabric) *simEngine {
	t.Helper()
	cfg := simConfig()
	host := fab.Host(fmt.Sprintf("engine-%d", hostSeq.Add(1)))
	cfg.Net, cfg.Gate = host, host.Wait
	log := &syncbuf.Buffer{}
	e, err := engine.New(cfg, simlog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Listen(); err != nil {
		t.Fatal(err)
	}
	s := &simEngine{Engine: e, host: host, log: log}
	stop, ended := make(chan struct{}), make(chan struct{})
	e.Start()
	go func() {
		defer close(ended)
		tick := time.NewTicker(cfg.Tick)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				e.Shutdown()
				return
			case now := <-tick.C:
				host.Wait()
				e.Step(now)
			}
		}
	}()
	t.Cleanup(func() {
		host.Thaw()
		close(stop)
		<-ended
	})
	return s
}

// pull asks e for tokens from the source at addr ("host:port") and
// returns its result and how long it took.
func (e *simEngine) pull(t *testing.T, addr string, tokens []int32, id string) (engine.Result, time.Duration) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	req := engine.Request{Tokens: tokens, MaxTokens: 1}
	if addr != "" {
		req.Source = &engine.RemoteSource{KVRequestID: id, Host: host, Port: p}
	}
	return e.run(t, req)
}

func (e *simEngine) run(t *testing.T, req engineRequest) (engine.Result, time.Duration) {
	t.Helper()
	start := time.Now()
	ch := make(chan engine.Result, 1)
	e.Submit(e.ids.Add(1), req, func(r engine.Result) { ch <- r })
	select {
	case r := <-ch:
		return r, time.Since(start)
	case <-time.After(30 * time.Second):
		t.Fatal("request did not finish in 30 s")
		return engine.Result{}, 0
	}
}

// prompt is n tokens unique to name.
func prompt(name string, n int) []int32 {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s-%d ", name, i)
	}
	return kv.Tokenize(b.String())
}

// newLink is a link between dec and src on a host of its own.
func newLink(t *testing.T, fab *memnet.Fabric, dec, src *simEngine) *Link {
	t.Helper()
	l, err := New(Config{Name: "decoder-0>source-0", Decoder: dec.ID(), Source: src.ID(), Net: fab.Host("link"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

type engineRequest = engine.Request
