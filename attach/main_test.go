package attach

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/attach/guard"
	"p2pfault/fault"
	"p2pfault/runner/session"
	"p2pfault/sim"
)

// Re-exec conventions of this test binary (TestMain):
//   - sim.StandaloneEnv=1: act as `p2pfault sim ...` (the engines);
//   - guardEnv=1: act as the guard (guard.Main);
//   - stallerEnv=FILE: act as a p2pfault that attaches to FILE, stalls the
//     source named by stallerSourceEnv, prints "stalled GUARD-PID" and
//     waits to be SIGKILLed (with stallerNoGuardEnv=1, without a guard);
//     With actionEnv=kill it kills and restarts the source instead and
//     prints "restarted NEW-PID";
//   - listenEnv=ADDRS: a stand-in engine that listens on each
//     comma-separated address and answers /health on them; with
//     listenEnv=job:ADDRS it runs the stand-in as a job in a process group
//     of its own, as a job-control shell would.
const (
	guardEnv          = "P2PFAULT_TEST_GUARD"
	stallerEnv        = "P2PFAULT_TEST_STALLER"
	stallerSourceEnv  = "P2PFAULT_TEST_STALLER_SOURCE"
	stallerNoGuardEnv = "P2PFAULT_TEST_STALLER_NO_GUARD"
	listenEnv         = "P2PFAULT_TEST_LISTEN"
	actionEnv         = "P2PFAULT_TEST_ACTION"
	// replacerEnv=SID: act as a replace command (replace_test.go): SIGKILL
	// session SID, start a new engine on new ports and print its address.
	replacerEnv = "P2PFAULT_TEST_REPLACER"
	// stallerRankEnv=R: the staller stalls rank R of its source alone.
	stallerRankEnv = "P2PFAULT_TEST_STALLER_RANK"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(sim.StandaloneEnv) == "1":
		os.Exit(sim.RunStandalone(os.Args[1:]))
	case os.Getenv(guardEnv) == "1":
		os.Exit(guard.Main(os.Args[1:]))
	case os.Getenv(stallerEnv) != "":
		os.Exit(staller(os.Getenv(stallerEnv)))
	case os.Getenv(listenEnv) != "":
		os.Exit(listen(os.Getenv(listenEnv)))
	case os.Getenv(replacerEnv) != "":
		os.Exit(replacer(os.Getenv(replacerEnv), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// guardArgv runs this test binary as the guard.
func guardArgv(t *testing.T) ([]string, []string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{self}, []string{guardEnv + "=1", "GORACE=atexit_sleep_ms=0"}
}

func staller(path string) int {
	f, err := Load(path)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	dir := filepath.Dir(path)
	book, err := guard.NewBook(filepath.Join(dir, guard.RecordFile))
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	opts := Options{LogDir: dir, Book: book}
	if os.Getenv(stallerNoGuardEnv) != "1" {
		self, _ := os.Executable()
		opts.Guard, opts.GuardEnv = []string{self}, []string{guardEnv + "=1", stallerEnv + "="}
	}
	c, err := Open(context.Background(), f, opts)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	t, _ := c.Source(os.Getenv(stallerSourceEnv))
	if os.Getenv(actionEnv) == "kill" {
		r, err := t.Do(context.Background(), fault.ActionKill)
		if err == nil {
			_, err = t.Do(context.Background(), fault.ActionReady)
		}
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("restarted", r.NewPid)
		time.Sleep(time.Hour)
		return 0
	}
	var err2 error
	if r := os.Getenv(stallerRankEnv); r != "" {
		n, _ := strconv.Atoi(r)
		var rt fault.Target
		if rt, err2 = t.RankTarget(n); err2 == nil {
			_, err2 = rt.Stop(context.Background())
		}
	} else {
		_, err2 = t.Do(context.Background(), fault.ActionStall)
	}
	if err2 != nil {
		fmt.Println("error", err2)
		return 1
	}
	gpid := 0
	switch fl := t.faulter.(type) {
	case *localFaulter:
		if fl.stall.guard != nil {
			gpid = fl.stall.guard.Pid()
		}
	case *commandFaulter:
		if fl.guard != nil {
			gpid = fl.guard.Pid()
		}
	}
	fmt.Println("stalled", gpid)
	time.Sleep(time.Hour)
	return 0
}

func listen(addrs string) int {
	if rest, ok := strings.CutPrefix(addrs, "job:"); ok {
		self, _ := os.Executable()
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), listenEnv+"="+rest)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Stderr = os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		l, _ := bufio.NewReader(out).ReadString('\n')
		fmt.Print(l)
		_ = cmd.Wait()
		return 0
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {})
	for _, a := range strings.Split(addrs, ",") {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go http.Serve(ln, mux)
	}
	fmt.Println("listening")
	time.Sleep(time.Hour)
	return 0
}

// fakeDecoder is a decoder stand-in answering /health, for tests that
// fault a source and never send a request.
func fakeDecoder(t *testing.T) engine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return engine{name: "decoder", http: ln.Addr().(*net.TCPAddr).Port}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	// The kernel may hand a port just closed out again: a port given to
	// one engine of this process is never given to another, or the second
	// would fail to bind and never be healthy (seen in a fresh clone's CI).
	handedMu.Lock()
	defer handedMu.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !handed[port] {
			handed[port] = true
			return port
		}
	}
}

var (
	handedMu sync.Mutex
	handed   = map[int]bool{}
)

// killSessionOnCleanup SIGKILLs session sid at the end of the test and
// waits until it is empty.
func killSessionOnCleanup(t *testing.T, sid int) {
	t.Cleanup(func() { killSession(sid) })
}

func killSession(sid int) {
	if sid <= 1 {
		return
	}
	_, _ = session.Signal(sid, unix.SIGKILL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = session.WaitGone(ctx, sid, 10*time.Millisecond)
}

// engine is a simulated engine this test started itself, as a user's
// script would: `p2pfault sim serve`, in a session of its own.
type engine struct {
	name      string
	http, p2p int
	pid       int // leader; the session id too
}

func (e engine) url() string { return "http://127.0.0.1:" + strconv.Itoa(e.http) }
func (e engine) p2pAddr() string {
	return "127.0.0.1:" + strconv.Itoa(e.p2p)
}

// kvConfig is the --kv-transfer-config of run_accuracy_test.sh for an
// engine whose P2P tier listens on port.
func kvConfig(port int) string {
	b, _ := json.Marshal(map[string]any{
		"kv_connector": "OffloadingConnector",
		"kv_role":      "kv_both",
		"kv_connector_extra_config": map[string]any{
			"spec_name":        "TieringOffloadingSpec",
			"cpu_bytes_to_use": 209715200,
			"secondary_tiers":  []map[string]any{{"type": "p2p", "host": "127.0.0.1", "port": port}},
		},
	})
	return string(b)
}

func startEngine(t *testing.T, name string) engine {
	t.Helper()
	return startEngineAt(t, name, "0.05")
}

// startEngineAt starts engine name with its timeouts at --sim-time-scale
// scale, and more flags of `sim serve` after the rest.
func startEngineAt(t *testing.T, name, scale string, more ...string) engine {
	t.Helper()
	// A port freePort found free may be taken by another package's test
	// before the engine binds it, and a data-parallel engine binds p2p+1
	// too, which nothing reserved: an engine that exits on a port in use
	// is started again on others.
	for try := 1; ; try++ {
		e, log, err := tryEngineAt(t, name, scale, more...)
		if err == nil {
			return e
		}
		if try == 3 || !strings.Contains(log, "address already in use") {
			t.Fatalf("%s: %v; its log:\n%s", name, err, log)
		}
		t.Logf("%s (try %d): %v: started again on other ports", name, try, err)
	}
}

// tryEngineAt starts an engine on free ports and waits for its /health;
// on failure it returns its log.
func tryEngineAt(t *testing.T, name, scale string, more ...string) (engine, string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := engine{name: name, http: freePort(t), p2p: freePort(t)}
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := []string{"sim", "serve", "meta-llama/Llama-3.2-1B-Instruct",
		"--port", strconv.Itoa(e.http), "--host", "127.0.0.1",
		"--block-size", "128", "--max-model-len", "512", "--enable-prompt-tokens-details",
		"--kv-transfer-config", kvConfig(e.p2p), "--sim-time-scale", scale}
	cmd := exec.Command(self, append(args, more...)...)
	cmd.Env = append(os.Environ(), sim.StandaloneEnv+"=1", "PYTHONHASHSEED=42", "GORACE=atexit_sleep_ms=0")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.pid = cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reap it whoever kills it
	killSessionOnCleanup(t, e.pid)
	if err := healthyOrExited(e.url(), 60*time.Second, exited); err != nil {
		killSession(e.pid)
		log, _ := os.ReadFile(logPath)
		return e, string(log), err
	}
	return e, "", nil
}

// healthyOrExited waits for url's /health to answer 200, up to d; an
// error if it does not or the engine exits first.
func healthyOrExited(url string, d time.Duration, exited <-chan struct{}) error {
	o := Options{}.withDefaults()
	deadline := time.Now().Add(d)
	for {
		err := health(context.Background(), o, url)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before %s was healthy (last: %v)", url, err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %v: %v", url, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitHealth(t *testing.T, url string, d time.Duration) {
	t.Helper()
	if err := healthyOrExited(url, d, nil); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes an attach file for the decoder and sources; faults maps
// a source's name to its `faults:` YAML (empty: the default).
func writeFile(t *testing.T, dir string, dec engine, srcs []engine, faults map[string]string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "model: meta-llama/Llama-3.2-1B-Instruct\ndecoder:\n  url: %s\nsources:\n", dec.url())
	for _, s := range srcs {
		fmt.Fprintf(&b, "  - name: %s\n    url: %s\n    p2p: %s\n", s.name, s.url(), s.p2pAddr())
		if fy := faults[s.name]; fy != "" {
			fmt.Fprintf(&b, "    faults:%s\n", fy)
		}
	}
	path := filepath.Join(dir, "attach.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// child is a process of this test binary.
type child struct {
	cmd    *exec.Cmd
	waited chan struct{}
}

// kill SIGKILLs the child and waits until it is reaped.
func (c child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.waited
}

// startChild runs this binary with env and returns its first stdout line;
// the child is SIGKILLed at cleanup.
func startChild(t *testing.T, env ...string) (child, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=0"), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	c := child{cmd: cmd, waited: waited}
	t.Cleanup(c.kill)
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		l, _ := r.ReadString('\n')
		lines <- strings.TrimSpace(l)
		_, _ = io.Copy(io.Discard, r)
	}()
	select {
	case l := <-lines:
		return c, l
	case <-time.After(60 * time.Second):
		t.Fatal("child printed nothing in 60 s")
	}
	return c, ""
}
