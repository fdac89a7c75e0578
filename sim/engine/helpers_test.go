package engine

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/internal/syncbuf"
	"p2pfault/memnet"
	"p2pfault/netenv"
	"p2pfault/sim/kv"
	"p2pfault/sim/simlog"
)

// testConfig is a fast engine: timeouts in the hundreds of milliseconds.
func testConfig() Config {
	return Config{
		Model:             "m",
		BlockSize:         16,
		TPSize:            1,
		KVBytesPerToken:   1024,
		HashSeed:          "42",
		GPUBlocks:         256,
		CPUBlocks:         1024,
		P2P:               true,
		P2PHost:           "127.0.0.1",
		HandshakeTimeout:  600 * time.Millisecond,
		LookupTimeout:     150 * time.Millisecond,
		HeartbeatInterval: 50 * time.Millisecond,
		HeartbeatTimeout:  400 * time.Millisecond,
		LookupHold:        500 * time.Millisecond,
		LoadTimeout:       300 * time.Millisecond,
		AbortAckTimeout:   100 * time.Millisecond,
		TransferBandwidth: 10e9,
		Tick:              2 * time.Millisecond,
		FreezeGap:         100 * time.Millisecond,
		StaleRoute:        true,
	}
}

// fabrics holds the in-memory network of each test running in a synctest
// bubble (virtual): its engines listen and dial there, on the fake clock.
var fabrics sync.Map // *testing.T → *memnet.Fabric

// virtual runs f in a synctest bubble whose engines (startEngine) run on a
// memnet fabric: time is the fake clock, which moves only when every
// goroutine waits, so a deadline's figure is exact whatever the machine's
// load, and a stall of seconds takes the CPU time of its steps.
func virtual(t *testing.T, f func(t *testing.T)) {
	synctest.Test(t, func(t *testing.T) {
		fabrics.Store(t, memnet.New(1))
		t.Cleanup(func() { fabrics.Delete(t) })
		f(t)
	})
}

// hostFor is a new host on t's fabric, or nil outside a virtual test.
func hostFor(t *testing.T) *memnet.Host {
	f, ok := fabrics.Load(t)
	if !ok {
		return nil
	}
	return f.(*memnet.Fabric).Host(fmt.Sprintf("engine-%d", hostSeq.Add(1)))
}

// freePort is a port nobody listens on now, on t's network.
func freePort(t *testing.T) int {
	t.Helper()
	var n interface {
		Listen(network, address string) (net.Listener, error)
	} = netenv.OS{}
	if h := hostFor(t); h != nil {
		n = h
	}
	ln, err := n.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// driven is an engine stepped by its own goroutine, which a test can pause
// to freeze it (its sockets stay open, as a SIGSTOPped process's do).
type driven struct {
	*Engine
	log    *syncbuf.Buffer
	ids    atomic.Uint64
	mu     sync.Mutex
	paused bool
	// The longest wait between two steps since resetGap: a deadline fires
	// at the first step at or after it, so no later than this past it. A
	// loaded machine stretches it; a timing test widens its margins by it.
	lastStep time.Time
	maxGap   time.Duration
	calls    chan func()  // run by the stepping goroutine, between steps
	host     *memnet.Host // in a virtual test: the engine's process, frozen while paused
	stop     chan struct{}
	ended    chan struct{}
}

func startEngine(t *testing.T, mutate func(*Config)) *driven {
	t.Helper()
	cfg := testConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	host := hostFor(t)
	if host != nil {
		// As the virtual cluster runs an engine (sim/inprocess.go): on its
		// host's network, its goroutines stopped while the host is frozen
		// (without the gate a frozen source's heartbeat timers still fired
		// and closed its connections, a FIN no stopped process sends).
		cfg.Net, cfg.Gate = host, host.Wait
	}
	log := &syncbuf.Buffer{}
	e, err := New(cfg, simlog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Listen(); err != nil {
		t.Fatal(err)
	}
	d := &driven{Engine: e, log: log, calls: make(chan func()), stop: make(chan struct{}), ended: make(chan struct{}), host: host}
	e.Start()
	go d.loop()
	t.Cleanup(d.shutdown)
	return d
}

func (d *driven) loop() {
	defer close(d.ended)
	t := time.NewTicker(d.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			d.Shutdown()
			return
		case f := <-d.calls:
			f()
		case <-t.C:
			now := time.Now()
			d.mu.Lock()
			paused := d.paused
			if !paused {
				if !d.lastStep.IsZero() {
					d.maxGap = max(d.maxGap, now.Sub(d.lastStep))
				}
				d.lastStep = now
			}
			d.mu.Unlock()
			if !paused {
				d.Step(now)
			}
		}
	}
}

// inLoop runs f on the stepping goroutine, between two steps, so f may read
// the engine's state.
func (d *driven) inLoop(f func(e *Engine)) {
	done := make(chan struct{})
	d.calls <- func() { f(d.Engine); close(done) }
	<-done
}

// resetGap starts a new measure of the longest wait between steps.
func (d *driven) resetGap() {
	d.mu.Lock()
	d.maxGap = 0
	d.mu.Unlock()
}

// stepGap is the longest wait between two steps since resetGap.
func (d *driven) stepGap() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.maxGap
}

// setPaused stops or resumes the engine's steps; in a virtual test its
// sockets stop too, as a SIGSTOPped process's do (memnet.Host.Freeze).
func (d *driven) setPaused(p bool) {
	d.mu.Lock()
	d.paused = p
	d.mu.Unlock()
	if d.host != nil {
		if p {
			d.host.Freeze()
		} else {
			d.host.Thaw()
		}
	}
}

func (d *driven) shutdown() {
	select {
	case <-d.stop:
	default:
		close(d.stop)
	}
	<-d.ended
}

var hostSeq atomic.Uint64

// prompt returns n unique tokens for trial.
func prompt(trial string, n int) []int32 {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s-%d ", strings.Join(strings.Fields(trial), "_"), i)
	}
	return kv.Tokenize(b.String())
}

type outcome struct {
	res     Result
	latency time.Duration
	at      time.Time // when the result came
}

// run submits req and waits for its result.
func run(t *testing.T, e *driven, req Request) outcome {
	t.Helper()
	start := time.Now()
	ch := make(chan Result, 1)
	e.Submit(e.ids.Add(1), req, func(r Result) { ch <- r })
	select {
	case r := <-ch:
		return outcome{res: r, latency: time.Since(start)}
	case <-time.After(10 * time.Second):
		t.Fatalf("request did not finish in 10s")
		return outcome{}
	}
}

// runAsync submits req and delivers its outcome on the returned channel.
func runAsync(e *driven, req Request) <-chan outcome {
	start := time.Now()
	ch := make(chan outcome, 1)
	e.Submit(e.ids.Add(1), req, func(r Result) { now := time.Now(); ch <- outcome{res: r, latency: now.Sub(start), at: now} })
	return ch
}

func pull(src *driven, tokens []int32, id string) Request {
	host, port := splitID(src.ID())
	return Request{Tokens: tokens, MaxTokens: 1, Source: &RemoteSource{KVRequestID: id, Host: host, Port: port}}
}

func splitID(id string) (string, int) {
	i := strings.LastIndexByte(id, ':')
	var port int
	fmt.Sscanf(id[i+1:], "%d", &port)
	return id[:i], port
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// do runs fn on the stepping goroutine at the next step, so a test of this
// package can read the engine's state without racing it. It reports false
// when the engine has shut down.
func (e *Engine) do(fn func()) bool { return e.post(evDo{fn: fn}) }
