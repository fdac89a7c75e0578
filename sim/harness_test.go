package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"p2pfault/internal/syncbuf"
)

// engineProc is one sim engine started as a process in its own session
// (Setsid), so the session id is the front end's pid and a fault can signal
// every member with kill(-pid).
type engineProc struct {
	name    string
	cmd     *exec.Cmd
	pid     int
	log     *syncbuf.Buffer
	url     string // http://127.0.0.1:port
	p2pHost string
	p2pPort int
	exited  chan struct{}
	waitErr error
}

type engineOpts struct {
	bin   string   // the program to run; "" is this (race-built) test binary
	mode  string   // --p2p-pending-handshake
	scale string   // --sim-time-scale
	env   []string // extra environment, e.g. PYTHONHASHSEED=7
	args  []string // extra flags
	noP2P bool
}

// kvConfig is the launch script's --kv-transfer-config with a free P2P port
// and a CPU tier large enough that no test prompt is evicted.
const kvConfig = `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":4294967296,"secondary_tiers":[{"type":"p2p","host":"127.0.0.1","port":0}]}}`

// engineCmd returns the command line of bin (the test binary if "")
// acting as `p2pfault sim ...`.
func engineCmd(bin string, args []string, env []string) *exec.Cmd {
	if bin == "" {
		bin = os.Args[0]
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "P2PFAULT_TEST_MAIN=1", "PYTHONHASHSEED=42"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

var readyLine = regexp.MustCompile(`engine ready: serving model \S+ on http://(\S+), P2P identity (\S+)`)

func startEngine(t testing.TB, name string, o engineOpts) *engineProc {
	t.Helper()
	args := append([]string{"sim", "serve"}, serveArgs(o)...)
	e := &engineProc{name: name, log: &syncbuf.Buffer{}, exited: make(chan struct{})}
	e.cmd = engineCmd(o.bin, args, o.env)
	e.cmd.Stderr = e.log
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	e.pid = e.cmd.Process.Pid
	go func() { e.waitErr = e.cmd.Wait(); close(e.exited) }()
	// End the whole session (front end and core) even if the test failed
	// or left it stopped: SIGKILL ends stopped processes too.
	t.Cleanup(func() {
		e.kill(t)
		if t.Failed() {
			t.Logf("%s log:\n%s", name, e.log)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := readyLine.FindStringSubmatch(e.log.String()); m != nil {
			e.url = "http://" + m[1]
			if h, p, ok := strings.Cut(m[2], ":"); ok {
				e.p2pHost = h
				e.p2pPort, _ = strconv.Atoi(p)
			}
			return e
		}
		select {
		case <-e.exited:
			t.Fatalf("%s exited before ready (%v):\n%s", name, e.waitErr, e.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s:\n%s", name, e.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill ends the engine's whole session and waits for it; it may be called
// more than once.
func (e *engineProc) kill(t testing.TB) {
	t.Helper()
	_ = syscall.Kill(-e.pid, syscall.SIGKILL)
	select {
	case <-e.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("%s (session %d) did not exit after SIGKILL", e.name, e.pid)
	}
	waitSessionGone(t, e.pid)
}

func (e *engineProc) p2pID() string { return fmt.Sprintf("%s:%d", e.p2pHost, e.p2pPort) }

// signal sends sig to every process of the engine's session.
func (e *engineProc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(-e.pid, sig); err != nil {
		t.Fatalf("signal %v to session of %s: %v", sig, e.name, err)
	}
}

// members lists the pids of the engine's session: the front end and its core.
func (e *engineProc) members(t testing.TB) []int {
	t.Helper()
	return sessionMembers(t, e.pid)
}

// core is the engine-core child's pid.
func (e *engineProc) core(t testing.TB) int {
	t.Helper()
	for _, p := range e.members(t) {
		if p != e.pid {
			return p
		}
	}
	t.Fatalf("%s has no engine-core process in session %d", e.name, e.pid)
	return 0
}

func sessionMembers(t testing.TB, sid int) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, d := range dirs {
		st, err := readStat(d)
		if err != nil {
			continue // the process ended meanwhile
		}
		if st.session == sid && st.state != "Z" {
			out = append(out, st.pid)
		}
	}
	return out
}

type procStat struct {
	pid     int
	state   string
	session int
}

// readStat parses /proc/PID/stat; the command name may contain spaces, so
// fields are counted after its closing parenthesis.
func readStat(path string) (procStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("%s: no command name", path)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:strings.IndexByte(s, '(')]))
	if err != nil {
		return procStat{}, fmt.Errorf("%s: pid: %w", path, err)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return procStat{}, fmt.Errorf("%s: short stat", path)
	}
	sid, err := strconv.Atoi(f[3])
	if err != nil {
		return procStat{}, fmt.Errorf("%s: session: %w", path, err)
	}
	return procStat{pid: pid, state: f[0], session: sid}, nil
}

func procState(t testing.TB, pid int) string {
	t.Helper()
	st, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	return st.state
}

// waitState waits until every pid is in state want ("T" stopped).
func waitState(t testing.TB, want string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for procState(t, p) != want {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d is in state %s, want %s", p, procState(t, p), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func waitSessionGone(t testing.TB, sid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(sessionMembers(t, sid)) > 0 {
		if time.Now().After(deadline) {
			t.Errorf("session %d still has processes %v", sid, sessionMembers(t, sid))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitLog(t testing.TB, e *engineProc, substr string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(e.log.String(), substr) {
		if time.Now().After(deadline) {
			t.Fatalf("%s log lacks %q after %v:\n%s", e.name, substr, within, e.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// plainBinary builds p2pfault without the race detector into a temporary
// folder: for tests that run several clusters at once, whose race-built
// engines would starve a shared 2-core machine (the engine's own races are
// caught by the tests that run this race-built binary).
func plainBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "p2pfault")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// words is a unique prompt of n whitespace-separated words: n tokens.
func words(tag string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s-%d ", tag, i)
	}
	return b.String()
}

// result is one completion as a client saw it.
type result struct {
	status int
	cached int
	prompt int
	// sent is the instant just before the request went out; latency counts
	// from it. A caller's own clock read before the call can be seconds
	// earlier on a loaded machine (its goroutine waits to run), so times
	// on a timeline are taken from sent, never from before the call.
	sent        time.Time
	latency     time.Duration
	serviceTime time.Duration
	body        string
	err         error
}

func newClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
}

func postCompletion(c *http.Client, url string, body any) result {
	return postCompletionWith(c, url, body, nil)
}

// postCompletionWith is postCompletion with extra request headers.
func postCompletionWith(c *http.Client, url string, body any, header http.Header) result {
	b, err := json.Marshal(body)
	if err != nil {
		return result{err: err, sent: time.Now()}
	}
	start := time.Now()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/completions", bytes.NewReader(b))
	if err != nil {
		return result{err: err, sent: start}
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err, sent: start, latency: time.Since(start)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, sent: start, latency: time.Since(start), body: string(raw), err: err}
	if st, perr := strconv.ParseFloat(resp.Header.Get(serviceTimeHeader), 64); perr == nil {
		r.serviceTime = time.Duration(st * float64(time.Second))
	}
	var parsed struct {
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if resp.StatusCode == http.StatusOK && json.Unmarshal(raw, &parsed) == nil {
		r.prompt = parsed.Usage.PromptTokens
		if parsed.Usage.PromptTokensDetails != nil {
			r.cached = parsed.Usage.PromptTokensDetails.CachedTokens
		}
	}
	return r
}

// seed sends prompt straight to a source, as the probe does.
func seed(t testing.TB, c *http.Client, src *engineProc, prompt string) {
	t.Helper()
	r := postCompletion(c, src.url, map[string]any{"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0})
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("seed on %s: status %d err %v body %s", src.name, r.status, r.err, r.body)
	}
}

// pullSeq keeps kv_request_ids unique when pulls start at one instant (on
// a synctest bubble's fake clock they do).
var pullSeq atomic.Uint64

// pull asks the decoder for prompt naming src as its remote_kv_source.
func pull(c *http.Client, dec, src *engineProc, prompt string) result {
	return postCompletion(c, dec.url, map[string]any{
		"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0,
		"kv_transfer_params": map[string]any{"remote_kv_source": map[string]any{
			"kv_request_id": fmt.Sprintf("pull-%d-%d", time.Now().UnixNano(), pullSeq.Add(1)), "remote_host": src.p2pHost, "remote_port": src.p2pPort,
		}},
	})
}

// warm pulls from src until one hits, so the decoder's session with it is
// handshaken (in prefill mode the first pull only starts the handshake).
func warm(t testing.TB, c *http.Client, dec, src *engineProc) {
	t.Helper()
	for i := 0; i < 100; i++ {
		p := words(fmt.Sprintf("warm-%s-%s-%d", dec.name, src.name, i), 400)
		seed(t, c, src, p)
		if r := pull(c, dec, src, p); r.status == http.StatusOK && r.cached > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no warm-up pull from %s into %s hit", src.name, dec.name)
}
