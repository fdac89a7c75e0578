// Package zmqpeer runs zmqpeer.py, a vLLM P2P control-channel peer on
// real libzmq (Debian's python3-zmq and python3-msgpack, under Debian's
// own /usr/bin/python3), from a test: its sockets are laid out as vLLM's
// control/zmq.py lays them (a ROUTER bound, a DEALER per peer with the
// identity "host:port", heartbeats, a monitor on EVENT_DISCONNECTED), and
// the test drives it by JSON lines. See zmqpeer.py for the protocol.
package zmqpeer

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Python is Debian's python3: a machine's default python3 may be another
// build that does not see Debian's packages.
const Python = "/usr/bin/python3"

// Event is one line zmqpeer.py printed.
type Event struct {
	Ev       string  `json:"ev"`
	T        float64 `json:"t"` // CLOCK_MONOTONIC seconds
	Addr     string  `json:"addr"`
	Peer     string  `json:"peer"`
	From     string  `json:"from"`
	Identity string  `json:"identity"`
	Endpoint string  `json:"endpoint"`
	What     string  `json:"what"`
	Msg      any     `json:"msg"` // decoded msgpack; bytes as {"$bytes": hex}
	Raw      string  `json:"raw"` // the payload, hex
	Bytes    int     `json:"bytes"`
	Line     string  `json:"-"`
	At       time.Time
}

// RawBytes is the received payload.
func (e Event) RawBytes() []byte {
	b, _ := hex.DecodeString(e.Raw)
	return b
}

// Field is a field of the decoded msgpack map ("" when absent).
func (e Event) Field(name string) any {
	m, _ := e.Msg.(map[string]any)
	return m[name]
}

// Bytes is how a bytes value is written in a message sent through Send.
func Bytes(b []byte) map[string]any { return map[string]any{"$bytes": hex.EncodeToString(b)} }

// Options start a peer.
type Options struct {
	Bind string // the ROUTER's address (default 127.0.0.1:0)
	// Heartbeat IVL, TIMEOUT, TTL (default vLLM's 2 s, 10 s, 10 s).
	HeartbeatIvl, HeartbeatTimeout, HeartbeatTTL time.Duration
}

// Peer is a running zmqpeer.py.
type Peer struct {
	Addr string // its ROUTER's address, and its DEALERs' identity
	t    testing.TB
	cmd  *exec.Cmd
	in   io.WriteCloser
	evs  chan Event
	mu   sync.Mutex
	log  []string
}

// Script is zmqpeer.py's path, beside this file.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "zmqpeer.py")
}

// Available says why Debian's python3 cannot run the peer ("" when it can).
func Available() string {
	out, err := exec.Command(Python, "-c", "import zmq, msgpack").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s cannot import zmq and msgpack (apt-get install python3-zmq python3-msgpack): %v: %s", Python, err, out)
	}
	return ""
}

// Start runs a peer, skipping the test when Debian's python3 lacks zmq or
// msgpack; it is ended (stdin closed, then killed by pid) at cleanup.
func Start(t testing.TB, o Options) *Peer {
	t.Helper()
	if why := Available(); why != "" {
		t.Skip(why)
	}
	ms := func(d, def time.Duration) int64 {
		if d == 0 {
			d = def
		}
		return d.Milliseconds()
	}
	bind := o.Bind
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	hb := fmt.Sprintf("%d,%d,%d", ms(o.HeartbeatIvl, 2*time.Second), ms(o.HeartbeatTimeout, 10*time.Second), ms(o.HeartbeatTTL, 10*time.Second))
	cmd := exec.Command(Python, Script(), "--bind", bind, "--hb", hb)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", Script(), err)
	}
	p := &Peer{t: t, cmd: cmd, in: in, evs: make(chan Event, 1024)}
	t.Cleanup(p.stop)
	go p.read(out)
	p.Addr = p.Await(10*time.Second, func(e Event) bool { return e.Ev == "bound" }).Addr
	return p
}

func (p *Peer) read(out io.Reader) {
	defer close(p.evs)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		e := Event{Line: sc.Text(), At: time.Now()}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			e = Event{Ev: "garbage", What: sc.Text(), At: e.At}
		}
		p.mu.Lock()
		p.log = append(p.log, e.Line)
		p.mu.Unlock()
		p.evs <- e
	}
}

// stop closes stdin (the script quits and closes its sockets), then
// kills it by pid if it has not exited within 5 s.
func (p *Peer) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// Pid is the script's process id.
func (p *Peer) Pid() int { return p.cmd.Process.Pid }

func (p *Peer) do(cmd map[string]any) {
	p.t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("zmqpeer <- %s", b)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("zmqpeer: write command: %v", err)
	}
}

// Connect opens the DEALER to peer ("host:port").
func (p *Peer) Connect(peer string) { p.do(map[string]any{"cmd": "connect", "peer": peer}) }

// Send sends msg, msgpack-encoded, over the DEALER to peer (opened if
// need be).
func (p *Peer) Send(peer string, msg map[string]any) {
	p.do(map[string]any{"cmd": "send", "peer": peer, "msg": msg})
}

// SendRaw sends b as it is over the DEALER to peer.
func (p *Peer) SendRaw(peer string, b []byte) {
	p.do(map[string]any{"cmd": "send", "peer": peer, "raw": hex.EncodeToString(b)})
}

// Close closes the DEALER to peer (monitor disabled first).
func (p *Peer) Close(peer string) { p.do(map[string]any{"cmd": "close", "peer": peer}) }

// Await returns the first event, from now on, that ok accepts; it fails
// the test after within. Every event read is logged (the transcript).
func (p *Peer) Await(within time.Duration, ok func(Event) bool) Event {
	p.t.Helper()
	timeout := time.After(within)
	for {
		select {
		case e, open := <-p.evs:
			if !open {
				p.t.Fatalf("zmqpeer exited; its lines: %q", p.Lines())
			}
			p.t.Logf("zmqpeer -> %s", e.Line)
			if e.Ev == "error" || e.Ev == "garbage" {
				p.t.Fatalf("zmqpeer: %s", e.What)
			}
			if ok(e) {
				return e
			}
		case <-timeout:
			p.t.Fatalf("zmqpeer: nothing awaited within %v; its lines: %q", within, p.Lines())
		}
	}
}

// Lines are every line the script printed so far.
func (p *Peer) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}
