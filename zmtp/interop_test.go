package zmtp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"p2pfault/internal/zmqpeer"
)

// helperEnv makes the test binary act as a Go peer (runHelperPeer).
const helperEnv = "P2PFAULT_TEST_ZMTP_PEER"

func TestMain(m *testing.M) {
	if hb := os.Getenv(helperEnv); hb != "" {
		runHelperPeer(hb)
		return
	}
	os.Exit(m.Run())
}

// interopHB is the heartbeat the interop tests give both sides: vLLM's
// 2000,10000,10000 ms compressed tenfold, or P2PFAULT_ZMTP_INTEROP_HB.
func interopHB(t *testing.T) (Options, zmqpeer.Options) {
	spec := os.Getenv("P2PFAULT_ZMTP_INTEROP_HB")
	if spec == "" {
		spec = "200,1000,1000"
	}
	o, err := parseHB(spec)
	if err != nil {
		t.Fatalf("P2PFAULT_ZMTP_INTEROP_HB=%q: %v", spec, err)
	}
	return o, zmqpeer.Options{HeartbeatIvl: o.HeartbeatIvl, HeartbeatTimeout: o.HeartbeatTimeout, HeartbeatTTL: o.HeartbeatTTL}
}

func parseHB(spec string) (Options, error) {
	f := strings.Split(spec, ",")
	if len(f) != 3 {
		return Options{}, fmt.Errorf("want IVL,TIMEOUT,TTL in ms")
	}
	var d [3]time.Duration
	for i, s := range f {
		n, err := strconv.Atoi(s)
		if err != nil {
			return Options{}, err
		}
		d[i] = time.Duration(n) * time.Millisecond
	}
	return Options{HeartbeatIvl: d[0], HeartbeatTimeout: d[1], HeartbeatTTL: d[2]}, nil
}

// goEngine is a Go side laid out as vLLM's: a ROUTER on loopback whose
// address is its identity, and a DEALER per peer with that identity.
type goEngine struct {
	id string
	r  *Router
	o  Options
}

func newGoEngine(t *testing.T, o Options) *goEngine {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.Logf = t.Logf
	r := NewRouter(ln, o)
	t.Cleanup(func() { r.Close() })
	return &goEngine{id: ln.Addr().String(), r: r, o: o}
}

func (e *goEngine) dealer(t *testing.T, peer string) *Dealer {
	o := e.o
	o.Identity = []byte(e.id)
	d := NewDealer(o)
	t.Cleanup(func() { d.Close() })
	if err := d.Connect(peer); err != nil {
		t.Fatal(err)
	}
	return d
}

func pack(t *testing.T, m map[string]any) []byte {
	b, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInteropBothWaysWithIdentities: a Go DEALER's connect reaches
// libzmq's ROUTER with the Go engine's identity, and libzmq's answer comes
// back over libzmq's own DEALER (identity: its address) into the Go
// ROUTER, as vLLM's replies cross the other connection; then the other
// way round, a lookup from libzmq answered over a Go DEALER.
func TestInteropBothWaysWithIdentities(t *testing.T) {
	o, po := interopHB(t)
	py := zmqpeer.Start(t, po)
	g := newGoEngine(t, o)
	toPy := g.dealer(t, py.Addr)
	toPy.Send(pack(t, map[string]any{"type": "connect", "peer_id": g.id, "agent_metadata": []byte{1, 2}, "block_len": 4096}))
	got := py.Await(10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "recv" })
	if got.From != g.id || got.Field("type") != "connect" || got.Field("peer_id") != g.id {
		t.Fatalf("libzmq ROUTER got from %q: %v; want a connect from %s", got.From, got.Msg, g.id)
	}
	if md, _ := got.Field("agent_metadata").(map[string]any); md["$bytes"] != "0102" {
		t.Fatalf("agent_metadata arrived as %v, want bytes 0102", got.Field("agent_metadata"))
	}
	py.Send(g.id, map[string]any{"type": "connect_ack", "peer_id": py.Addr})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, payload, err := g.r.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ack map[string]any
	if err := msgpack.Unmarshal(payload, &ack); err != nil {
		t.Fatal(err)
	}
	if string(id) != py.Addr || ack["type"] != "connect_ack" {
		t.Fatalf("Go ROUTER got from %q: %v; want connect_ack from %s", id, ack, py.Addr)
	}
	t.Logf("Go ROUTER <- [%s] %v", id, ack)
	py.Send(g.id, map[string]any{"type": "lookup", "kv_request_id": "r1", "block_hashes": []any{zmqpeer.Bytes([]byte("k1"))}})
	id, payload, err = g.r.Recv(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Go ROUTER <- [%s] %x", id, payload)
	toPy.Send(pack(t, map[string]any{"type": "lookup_resp", "kv_request_id": "r1", "hits": []bool{true}}))
	resp := py.Await(10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "recv" })
	if resp.From != g.id || resp.Field("type") != "lookup_resp" {
		t.Fatalf("libzmq ROUTER got %v from %q", resp.Msg, resp.From)
	}
}

// TestInteropHeartbeatsKeepAnIdleConnection: with heartbeats compressed
// tenfold on both sides, an idle pair stays up for several timeouts, so
// each side's PONG satisfies the other's timeout and TTL.
func TestInteropHeartbeatsKeepAnIdleConnection(t *testing.T) {
	o, po := interopHB(t)
	py := zmqpeer.Start(t, po)
	g := newGoEngine(t, o)
	d := g.dealer(t, py.Addr)
	d.Send([]byte("hello"))
	py.Await(10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "recv" })
	py.Connect(g.id)
	idle := 3 * (o.HeartbeatIvl + o.HeartbeatTimeout)
	deadline := time.After(idle)
	for {
		select {
		case ev := <-d.Events():
			if ev.Kind == Disconnected {
				t.Fatalf("Go DEALER disconnected while idle: %v", ev.Err)
			}
			continue
		case <-deadline:
		}
		break
	}
	py.SendRaw(g.id, []byte("still up"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, p, err := g.r.Recv(ctx); err != nil || string(p) != "still up" {
		t.Fatalf("after %v idle: %q, %v", idle, p, err)
	}
	for _, l := range py.Lines() {
		if strings.Contains(l, `"disconnected"`) {
			t.Fatalf("libzmq's monitor saw a disconnect while idle: %s", l)
		}
	}
}

// TestInteropTTLOfLibzmq: a Go DEALER that sends no PINGs of its own
// closes when libzmq's ROUTER stops (SIGSTOP) and its last PING's TTL
// passes: the TTL libzmq writes is read right.
func TestInteropTTLOfLibzmq(t *testing.T) {
	_, po := interopHB(t)
	py := zmqpeer.Start(t, po)
	d := NewDealer(Options{Identity: []byte("go:1"), Logf: t.Logf})
	t.Cleanup(func() { d.Close() })
	d.Connect(py.Addr)
	d.Send([]byte("hello"))
	py.Await(10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "recv" })
	time.Sleep(2 * po.HeartbeatIvl) // a PING with its TTL has arrived
	stopFor(t, py.Pid())
	stopped := time.Now()
	ev := nextEvent(t, d, Disconnected, 10*po.HeartbeatTTL+5*time.Second)
	took := time.Since(stopped)
	t.Logf("Go DEALER (no PINGs of its own) disconnected %v after libzmq stopped (TTL %v, ivl %v): %v", took, po.HeartbeatTTL, po.HeartbeatIvl, ev.Err)
	if lo, hi := po.HeartbeatTTL-po.HeartbeatIvl-100*time.Millisecond, po.HeartbeatTTL+5*time.Second; took < lo || took > hi {
		t.Fatalf("disconnected %v after the stop, want within [%v, %v]", took, lo, hi)
	}
}

// TestInteropStoppedLibzmqSeenByGo: the other way round, a Go DEALER
// with the same heartbeat sees libzmq's process, SIGSTOPped, disconnected
// within libzmq's own window.
func TestInteropStoppedLibzmqSeenByGo(t *testing.T) {
	o, po := interopHB(t)
	py := zmqpeer.Start(t, po)
	g := newGoEngine(t, o)
	d := g.dealer(t, py.Addr)
	d.Send([]byte("connect"))
	py.Await(10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "recv" })
	time.Sleep(2 * o.HeartbeatIvl)
	stopFor(t, py.Pid())
	stopped := time.Now()
	ev := nextEvent(t, d, Disconnected, o.HeartbeatIvl+o.HeartbeatTimeout+10*time.Second)
	took := ev.At.Sub(stopped)
	t.Logf("Go DEALER: libzmq's process disconnected %.2f s after SIGSTOP (heartbeat %v/%v/%v): %v", took.Seconds(), o.HeartbeatIvl, o.HeartbeatTimeout, o.HeartbeatTTL, ev.Err)
	if lo, hi := min(o.HeartbeatTTL, o.HeartbeatTimeout)-o.HeartbeatIvl-100*time.Millisecond, o.HeartbeatIvl+o.HeartbeatTimeout+5*time.Second; took < lo || took > hi {
		t.Fatalf("disconnect %v after SIGSTOP, want within [%v, %v]", took, lo, hi)
	}
}

// TestInteropStoppedGoProcessSeenByLibzmq: a Go engine in its own process,
// SIGSTOPped, is seen by libzmq's heartbeat as disconnected (its DEALER's
// monitor, as vLLM watches) after libzmq's own time: between the TTL of
// the Go side's last PING less an interval and libzmq's unanswered PING
// plus its timeout (libzmq against libzmq, 4.3.4, vLLM's 2/10/10 s: 11.99 s).
func TestInteropStoppedGoProcessSeenByLibzmq(t *testing.T) {
	o, po := interopHB(t)
	py := zmqpeer.Start(t, po)
	goAddr, pid := startHelperPeer(t, fmt.Sprintf("%d,%d,%d", o.HeartbeatIvl.Milliseconds(), o.HeartbeatTimeout.Milliseconds(), o.HeartbeatTTL.Milliseconds()))
	py.Send(goAddr, map[string]any{"type": "connect", "peer_id": py.Addr})
	ack := py.Await(10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "recv" })
	if ack.From != goAddr || string(ack.RawBytes()) != "ack" {
		t.Fatalf("libzmq got %q from %q, want ack from the Go process %s", ack.RawBytes(), ack.From, goAddr)
	}
	time.Sleep(2 * o.HeartbeatIvl)
	stopFor(t, pid)
	stopped := time.Now()
	ev := py.Await(o.HeartbeatIvl+o.HeartbeatTimeout+10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "disconnected" })
	took := ev.At.Sub(stopped)
	lo := min(o.HeartbeatTTL, o.HeartbeatTimeout) - o.HeartbeatIvl - 100*time.Millisecond
	hi := o.HeartbeatIvl + o.HeartbeatTimeout + 5*time.Second
	t.Logf("libzmq's monitor: %s disconnected %.2f s after SIGSTOP of pid %d (heartbeat %v/%v/%v; libzmq against libzmq at 2/10/10 s: 11.99 s)", ev.Peer, took.Seconds(), pid, o.HeartbeatIvl, o.HeartbeatTimeout, o.HeartbeatTTL)
	if took < lo || took > hi {
		t.Fatalf("disconnect %v after SIGSTOP, want within [%v, %v]", took, lo, hi)
	}
}

// TestInteropDuplicateIdentityAtLibzmq: libzmq's ROUTER ignores a second
// Go DEALER with an identity it already routes, as the Go ROUTER does
// (TestDuplicateIdentityIgnored).
func TestInteropDuplicateIdentityAtLibzmq(t *testing.T) {
	_, po := interopHB(t)
	py := zmqpeer.Start(t, po)
	mk := func() *Dealer {
		d := NewDealer(Options{Identity: []byte("X")})
		t.Cleanup(func() { d.Close() })
		d.Connect(py.Addr)
		return d
	}
	a := mk()
	a.Send([]byte("a1"))
	py.Await(10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "recv" && string(e.RawBytes()) == "a1" })
	b := mk()
	nextEvent(t, b, HandshakeSucceeded, 10*time.Second)
	time.Sleep(100 * time.Millisecond)
	b.Send([]byte("b1"))
	a.Send([]byte("a2"))
	py.Await(10*time.Second, func(e zmqpeer.Event) bool { return e.Ev == "recv" && string(e.RawBytes()) == "a2" })
	for _, l := range py.Lines() {
		if strings.Contains(l, hexOf("b1")) {
			t.Fatalf("libzmq delivered the duplicate's message: %s", l)
		}
	}
}

func hexOf(s string) string { return fmt.Sprintf("%x", s) }

// stopFor SIGSTOPs pid; cleanup SIGCONTs it (its own cleanup ends it).
func stopFor(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
}

// startHelperPeer runs this test binary as a Go engine (runHelperPeer)
// and returns its ROUTER's address and its pid; cleanup kills it by pid.
func startHelperPeer(t *testing.T, hb string) (string, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+hb)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("Go peer process: %v", err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}

// runHelperPeer is a Go engine's control channel as vLLM lays it out: a
// ROUTER whose address is its identity; a message from an identity it has
// no DEALER for opens one back to that address, and every message is
// answered "ack" over it. It prints its address and ends with its stdin.
func runHelperPeer(hb string) {
	o, err := parseHB(hb)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r := NewRouter(ln, o)
	id := ln.Addr().String()
	fmt.Println(id)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { bufio.NewReader(os.Stdin).ReadString('\n'); cancel() }()
	back := map[string]*Dealer{}
	for {
		from, _, err := r.Recv(ctx)
		if err != nil {
			break
		}
		d := back[string(from)]
		if d == nil {
			do := o
			do.Identity = []byte(id)
			d = NewDealer(do)
			d.Connect(string(from))
			back[string(from)] = d
		}
		d.Send([]byte("ack"))
	}
	for _, d := range back {
		d.Close()
	}
	r.Close()
}
