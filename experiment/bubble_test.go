package experiment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/netenv"
	"p2pfault/probe"
)

// pipeNet is an in-memory network of net.Pipe connections: a listener per
// address, a connect to an address nothing listens on refused. Every
// byte moves on channels, so a goroutine that waits on one is durably
// blocked in a synctest bubble (a real socket's read is not).
type pipeNet struct {
	mu  sync.Mutex
	lns map[string]*pipeListener
}

var _ netenv.Network = (*pipeNet)(nil)

type pipeListener struct {
	n     *pipeNet
	addr  string
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

func (n *pipeNet) Listen(_, address string) (net.Listener, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lns == nil {
		n.lns = map[string]*pipeListener{}
	}
	if n.lns[address] != nil {
		return nil, fmt.Errorf("listen %s: address in use", address)
	}
	l := &pipeListener{n: n, addr: address, conns: make(chan net.Conn), done: make(chan struct{})}
	n.lns[address] = l
	return l, nil
}

func (n *pipeNet) DialContext(ctx context.Context, _, address string) (net.Conn, error) {
	n.mu.Lock()
	l := n.lns[address]
	n.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("dial %s: connection refused", address)
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, fmt.Errorf("dial %s: connection refused", address)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.n.mu.Lock()
		delete(l.n.lns, l.addr)
		l.n.mu.Unlock()
	})
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(l.addr) }

// fakeCluster is a cluster of fake engines on a pipeNet: sources answer
// seeds, the decoder answers pulls with the prompt's whole blocks cached
// when its source was seeded with it. A stalled (frozen) source holds
// every request to it, and a pull naming it waits as the main arm's
// decoder does, on the pending handshake: until the source thaws or the
// 30 s handshake deadline, then prefills locally (no cached tokens); with
// prefillAtOnce (the fixed arm) it prefills at once.
type fakeCluster struct {
	nw            *pipeNet
	prefillAtOnce bool
	stopTakes     time.Duration // how long a stall's SIGSTOP takes to act (a loaded machine, a slow command)
	srcs          []*fakeEngine
	dec           *fakeEngine

	mu     sync.Mutex
	seeded map[string]bool // prompt key seeded on a source, "port/prompt"
}

const handshakeDeadline = 30 * time.Second

type fakeEngine struct {
	c     *fakeCluster
	role  event.Role
	index int
	host  string // its virtual host: every listener's
	p2p   int
	srv   *http.Server
	start time.Time

	mu     sync.Mutex
	frozen bool
	thawed chan struct{} // closed when the engine thaws
}

func (c *fakeCluster) Plan(fault.Timeline) (experiment.Plan, error) {
	return experiment.Plan{Sources: 2, Model: "fake", Engine: "fake"}, nil
}

func (c *fakeCluster) Open(ctx context.Context, env experiment.OpenEnv) (experiment.Cluster, error) {
	c.nw, c.seeded = &pipeNet{}, map[string]bool{}
	for i := range 2 {
		e := &fakeEngine{c: c, role: event.RoleSource, index: i, host: fmt.Sprintf("source-%d.fake", i), p2p: 9000 + i}
		if err := e.serve(e.serveSource); err != nil {
			return nil, err
		}
		c.srcs = append(c.srcs, e)
	}
	c.dec = &fakeEngine{c: c, role: event.RoleDecoder, host: "decoder.fake", p2p: 9100}
	if err := c.dec.serve(c.serveDecoder); err != nil {
		return nil, err
	}
	return c, nil
}

func (e *fakeEngine) serve(completions http.HandlerFunc) error {
	ln, err := e.c.nw.Listen("tcp", e.host+":80")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/completions", func(w http.ResponseWriter, r *http.Request) {
		e.hold(r.Context())
		completions(w, r)
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { e.hold(r.Context()) })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		e.hold(r.Context())
		fmt.Fprintln(w, "vllm:num_requests_running 0")
	})
	e.srv, e.start = &http.Server{Handler: mux}, time.Now()
	go func() { _ = e.srv.Serve(ln) }()
	return nil
}

// hold waits while the engine is frozen, as a stopped process answers
// nothing until SIGCONT.
func (e *fakeEngine) hold(ctx context.Context) {
	e.mu.Lock()
	frozen, thawed := e.frozen, e.thawed
	e.mu.Unlock()
	if frozen {
		select {
		case <-thawed:
		case <-ctx.Done():
		}
	}
}

func prompt(r *http.Request) (map[string]any, string, int, error) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return nil, "", 0, err
	}
	ids, _ := body["prompt"].([]any)
	b, _ := json.Marshal(ids)
	return body, string(b), len(ids), nil
}

func (e *fakeEngine) serveSource(w http.ResponseWriter, r *http.Request) {
	_, key, n, err := prompt(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e.c.mu.Lock()
	e.c.seeded[strconv.Itoa(e.p2p)+"/"+key] = true
	e.c.mu.Unlock()
	completion(w, n, 0)
}

func (c *fakeCluster) serveDecoder(w http.ResponseWriter, r *http.Request) {
	body, key, n, err := prompt(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	port := 0
	if kv, ok := body["kv_transfer_params"].(map[string]any); ok {
		if src, ok := kv["remote_kv_source"].(map[string]any); ok {
			if f, ok := src["remote_port"].(float64); ok {
				port = int(f)
			}
		}
	}
	var src *fakeEngine
	for _, s := range c.srcs {
		if s.p2p == port {
			src = s
		}
	}
	if src == nil {
		completion(w, n, 0)
		return
	}
	src.mu.Lock()
	frozen, thawed := src.frozen, src.thawed
	src.mu.Unlock()
	if frozen {
		if c.prefillAtOnce {
			completion(w, n, 0)
			return
		}
		deadline := time.NewTimer(handshakeDeadline)
		defer deadline.Stop()
		select {
		case <-thawed:
		case <-deadline.C:
			completion(w, n, 0) // the handshake deadline: local prefill
			return
		case <-r.Context().Done():
			return
		}
	}
	c.mu.Lock()
	seeded := c.seeded[strconv.Itoa(port)+"/"+key]
	c.mu.Unlock()
	cached := 0
	if seeded {
		cached = (n - 1) / 128 * 128
	}
	completion(w, n, cached)
}

func completion(w http.ResponseWriter, prompt, cached int) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","model":"fake","choices":[{"index":0,"text":"x","finish_reason":"length"}],`+
		`"usage":{"prompt_tokens":%d,"completion_tokens":1,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
		prompt, prompt+1, cached)
}

// The cluster's abilities: its own network, on which it cuts nothing.
func (c *fakeCluster) Sources() []experiment.Target {
	return []experiment.Target{c.srcs[0], c.srcs[1]}
}
func (c *fakeCluster) Decoder() experiment.Target { return c.dec }
func (c *fakeCluster) Network() netenv.Network    { return c.nw }
func (c *fakeCluster) Stop(ctx context.Context) error {
	for _, e := range append([]*fakeEngine{c.dec}, c.srcs...) {
		e.thaw()
		_ = e.srv.Close()
	}
	return nil
}

func (e *fakeEngine) Name() string {
	if e.role == event.RoleDecoder {
		return "decoder"
	}
	return fmt.Sprintf("source-%d", e.index)
}
func (e *fakeEngine) Role() event.Role { return e.role }
func (e *fakeEngine) Index() int       { return e.index }
func (e *fakeEngine) HTTPURL() string  { return "http://" + e.host }
func (e *fakeEngine) P2PHost() string  { return e.host }
func (e *fakeEngine) P2PPort() int     { return e.p2p }
func (e *fakeEngine) LogTail(int) []string {
	return nil
}

// State has no pid: a fake engine is goroutines of the test's process.
func (e *fakeEngine) State() event.EngineInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := event.StateReady
	if e.frozen {
		st = event.StateStopped
	}
	return event.EngineInfo{Name: e.Name(), Role: e.role, Index: e.index, State: st, HTTPPort: 80, P2PPort: e.p2p, Uptime: time.Since(e.start)}
}

// Report is what the fake says of itself (fault.Reporter): the stall's
// verification reads it.
func (e *fakeEngine) Report() fault.Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fault.Report{Frozen: e.frozen, Running: true, Instance: 1, Addrs: []string{e.host + ":80"}}
}

func (e *fakeEngine) Stop(context.Context) (time.Time, error) {
	time.Sleep(e.c.stopTakes)
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.frozen {
		e.frozen, e.thawed = true, make(chan struct{})
	}
	return time.Now(), nil
}

func (e *fakeEngine) thaw() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.frozen {
		e.frozen = false
		close(e.thawed)
	}
}

func (e *fakeEngine) Continue(context.Context) error { e.thaw(); return nil }

var errFakeCannot = errors.New("the fake engine does not do that")

func (e *fakeEngine) Kill(context.Context, func(time.Time, error)) (time.Time, error) {
	return time.Time{}, errFakeCannot
}
func (e *fakeEngine) Terminate(context.Context, func(time.Time, error)) error { return errFakeCannot }
func (e *fakeEngine) Restore(context.Context) (time.Time, error)              { return time.Time{}, errFakeCannot }

var (
	_ experiment.Cluster = (*fakeCluster)(nil)
	_ fault.Reporter     = (*fakeEngine)(nil)
)

// TestAStallRunsInASynctestBubble runs the seed's stall case at real
// time (scale 1: a 30 s stall, 25 s of recovery) inside a synctest bubble
// on fake engines reached through their own in-memory network: every
// timer of the run is the bubble's, so the figures are exact. On the main
// arm's decoder a pull naming the stalled source waits on the pending
// handshake until the thaw, so faulted_max fails at exactly 28.6 s; on the fixed
// arm's it prefills at once and the run passes. The stall and its resume
// are verified from the engine's own report (it has no /proc).
func TestAStallRunsInASynctestBubble(t *testing.T) {
	for _, arm := range []string{"main", "fixed"} {
		t.Run(arm, func(t *testing.T) {
			out := t.TempDir()
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				evs, v, err := runExperiment(t, experiment.Config{
					// Off the trial grid (source-0's every 0.5 s from
					// t0): a trial and the stall at one instant of the
					// bubble's clock would race, as they would in real
					// time, and the figures would not be exact.
					Arm: arm, Case: fault.ActionStall, FaultAt: 10100 * time.Millisecond,
					Cluster: &fakeCluster{prefillAtOnce: arm == "fixed"},
					OutDir:  out,
				})
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				took := time.Since(start)
				// Warm-up (one interval), 10 s to the fault, 30 s stall,
				// 25 s recovery, and the pulls in flight drained.
				if took < 65*time.Second || took > 70*time.Second {
					t.Errorf("the run took %v of the bubble's clock, want 65-70s", took)
				}
				var verified []string
				for _, ev := range evs {
					if ev.Kind == event.KindVerification {
						if !ev.Verification.Verified {
							t.Errorf("%s not verified: %s", ev.Verification.Action, ev.Verification.Detail)
						}
						verified = append(verified, ev.Verification.Action)
					}
				}
				if fmt.Sprint(verified) != "[stall resume]" {
					t.Errorf("verifications %v, want [stall resume]", verified)
				}
				r, ok := resultOf(&v, check.NameFaultedBound)
				if !ok {
					t.Fatalf("no %s in %+v", check.NameFaultedBound, v.Checks)
				}
				switch arm {
				case "main":
					if v.Passed || r.Passed {
						t.Fatalf("main arm: verdict %+v, want faulted_max failed", v.Checks)
					}
					// The first trial of the window (10.5 s) sends its
					// pull once its seed, held by the frozen source, gave
					// up 1 s later, and the pull waits on the handshake
					// until the thaw at 40.1 s: exactly 28.6 s, before the
					// 30 s deadline.
					want := 10100*time.Millisecond + experiment.DefaultFaultFor - (10500*time.Millisecond + probe.DefaultSeedTimeout)
					if v.Summary.Faulted.Max != want {
						t.Errorf("main arm: faulted max %v, want exactly %v", v.Summary.Faulted.Max, want)
					}
				case "fixed":
					if !v.Passed {
						t.Fatalf("fixed arm: verdict %+v, want passed", v.Checks)
					}
					if v.Summary.Faulted.Max != 0 {
						t.Errorf("fixed arm: faulted max %v, want 0 (a prefill at once takes no time on the bubble's clock)", v.Summary.Faulted.Max)
					}
				}
			})
		})
	}
}

// TestAScriptedStepWaitsForALateStallToEnd: `at 1s stall source-0 for
// 4s; at 6s stall source-0 for 1s`, and the first stall's action takes
// 2.5 s to act, as an attach file's command can on a loaded machine: it
// stops the source at 3.5 s and resumes it at 7.5 s, after the second
// step was due. The second step waits for that resume (with a warning)
// and fires then, rather than being refused as a stall of a stalled
// source (which failed the run).
func TestAScriptedStepWaitsForALateStallToEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evs, _, err := runExperiment(t, experiment.Config{
			Timeline: "at 1s stall source-0 for 4s; at 6s stall source-0 for 1s",
			Recovery: 2 * time.Second,
			Cluster:  &fakeCluster{stopTakes: 2500 * time.Millisecond},
		})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		var stalls []string
		waited := false
		for _, ev := range evs {
			switch {
			case ev.Kind == event.KindFault && ev.Fault.Action == fault.ActionStall:
				if ev.Fault.Err != "" {
					t.Errorf("stall at %v refused: %s", ev.T, ev.Fault.Err)
				}
				stalls = append(stalls, ev.T.Round(100*time.Millisecond).String())
			case ev.Kind == event.KindWarning && strings.Contains(ev.Message, "timeline: at 6s stall source-0 for 1s waits for the fault in force on source-0 to end"):
				waited = true
			}
		}
		// Each stall's event comes when its SIGSTOP acted: 1 s + 2.5 s,
		// and the first's resume (3.5 s + 4 s) + 2.5 s.
		if fmt.Sprint(stalls) != "[3.5s 10s]" || !waited {
			t.Errorf("stalls at %v, waited %v; want [3.5s 10s] and the wait's warning", stalls, waited)
		}
	})
}
