// Package enginetest is a stand-in for `p2pfault sim` in the runner's and
// fault's tests: the same process shape (an HTTP front end and a core child
// re-executed from the same binary, in one session, the core holding the P2P
// port) and the same command line, started in milliseconds, with knobs to
// fail on purpose. A test binary calls Main from TestMain when
// os.Getenv(EnvVar) is "1".
package enginetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// EnvVar makes a test binary act as the fake engine (see Main).
const EnvVar = "P2PFAULT_TEST_FAKE_ENGINE"

// Knobs, passed as extra engine arguments (runner.Config.ExtraArgs).
const (
	// FlagStartupDelay delays readiness, like model load: --fake-startup-delay=DURATION.
	FlagStartupDelay = "--fake-startup-delay"
	// FlagFail makes the front end print lines and exit with the given
	// code before it is ready: --fake-fail=CODE.
	FlagFail = "--fake-fail"
	// FlagIgnoreTerm makes both processes ignore SIGTERM, so only SIGKILL
	// ends them: --fake-ignore-term.
	FlagIgnoreTerm = "--fake-ignore-term"
)

// Main runs the fake engine for args (os.Args[1:]): `sim serve MODEL
// [flags]` or `sim core ...`, and returns the exit code.
func Main(args []string) int {
	if len(args) < 2 || args[0] != "sim" {
		fmt.Fprintf(os.Stderr, "fake engine: want `sim serve MODEL ...` or `sim core ...`, got %q\n", args)
		return 2
	}
	var err error
	switch args[1] {
	case "serve":
		err = serve(args[2:])
	case "core":
		err = core(args[2:])
	default:
		err = fmt.Errorf("unknown sim subcommand %q", args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ERROR fake engine: %v\n", err)
		return 1
	}
	return 0
}

type options struct {
	port       int
	host       string
	p2pHost    string
	p2pPort    int
	delay      time.Duration
	fail       int
	ignoreTerm bool
	dp         int // --data-parallel-size: one core per rank, rank r on p2pPort+r
}

// parse reads the flags the fake needs and skips the others, which the real
// engine would check.
func parse(args []string) (options, error) {
	o := options{host: "127.0.0.1", fail: -1, port: -1}
	value := func(i *int, name string) (string, error) {
		a := args[*i]
		if v, ok := cutFlag(a, name); ok {
			return v, nil
		}
		if *i+1 >= len(args) {
			return "", fmt.Errorf("flag %s needs a value", name)
		}
		*i++
		return args[*i], nil
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var err error
		var v string
		switch {
		case is(a, "--port"):
			if v, err = value(&i, "--port"); err == nil {
				o.port, err = strconv.Atoi(v)
			}
		case is(a, "--host"):
			o.host, err = value(&i, "--host")
		case is(a, "--kv-transfer-config"):
			if v, err = value(&i, "--kv-transfer-config"); err == nil {
				o.p2pHost, o.p2pPort, err = p2pTier(v)
			}
		case is(a, FlagStartupDelay):
			if v, err = value(&i, FlagStartupDelay); err == nil {
				o.delay, err = time.ParseDuration(v)
			}
		case is(a, FlagFail):
			if v, err = value(&i, FlagFail); err == nil {
				o.fail, err = strconv.Atoi(v)
			}
		case a == FlagIgnoreTerm:
			o.ignoreTerm = true
		case is(a, "--data-parallel-size"):
			if v, err = value(&i, "--data-parallel-size"); err == nil {
				o.dp, err = strconv.Atoi(v)
			}
		}
		if err != nil {
			return o, fmt.Errorf("flag %s: %w", a, err)
		}
	}
	if o.port < 0 {
		return o, errors.New("no --port")
	}
	return o, nil
}

func is(arg, name string) bool {
	_, ok := cutFlag(arg, name)
	return ok || arg == name
}

func cutFlag(arg, name string) (string, bool) {
	if len(arg) > len(name) && arg[:len(name)] == name && arg[len(name)] == '=' {
		return arg[len(name)+1:], true
	}
	return "", false
}

func p2pTier(js string) (string, int, error) {
	var cfg struct {
		Extra struct {
			Tiers []struct {
				Type string `json:"type"`
				Host string `json:"host"`
				Port int    `json:"port"`
			} `json:"secondary_tiers"`
		} `json:"kv_connector_extra_config"`
	}
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		return "", 0, err
	}
	for _, t := range cfg.Extra.Tiers {
		if t.Type == "p2p" {
			return t.Host, t.Port, nil
		}
	}
	return "", 0, errors.New("no p2p tier")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "INFO %s [fake] %s\n", time.Now().Format("01-02 15:04:05"), fmt.Sprintf(format, args...))
}

// serve is the front end: start the core, wait for it to hold the P2P
// port, then bind HTTP and answer /health.
func serve(args []string) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	if o.ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	logf("front end pid %d starting on port %d", os.Getpid(), o.port)
	if o.fail >= 0 {
		logf("loading model")
		fmt.Fprintf(os.Stderr, "ERROR fake engine: failing on purpose with code %d\n", o.fail)
		os.Exit(o.fail)
	}
	// The core's Pdeathsig fires when this thread exits; keep the forking
	// goroutine on it for good.
	runtime.LockOSThread()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// One core per data-parallel rank, as vLLM starts EngineCore_DP<r>;
	// any core's exit ends the front end (below), as vLLM's does.
	coreDone := make(chan error, max(o.dp, 1))
	var links []*os.File
	for r := range max(o.dp, 1) {
		linkW, err := startCore(self, o, r, coreDone)
		if err != nil {
			return err
		}
		links = append(links, linkW)
	}
	time.Sleep(o.delay)
	l, err := net.Listen("tcp", net.JoinHostPort(o.host, strconv.Itoa(o.port)))
	if err != nil {
		return fmt.Errorf("bind HTTP port %d: %w", o.port, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	go func() { _ = http.Serve(l, mux) }()
	logf("engine ready")
	term := make(chan os.Signal, 1)
	if !o.ignoreTerm {
		// Notify would undo signal.Ignore.
		signal.Notify(term, syscall.SIGTERM)
	}
	select {
	case err := <-coreDone:
		// A SIGTERM to the whole session may reach the core first.
		select {
		case <-term:
			logf("SIGTERM: core already down")
			return nil
		case <-time.After(200 * time.Millisecond):
			return fmt.Errorf("core died: %v", err)
		}
	case <-term:
		logf("SIGTERM: shutting down")
		for _, l := range links {
			_ = l.Close()
		}
		for range links {
			<-coreDone
		}
		return nil
	}
}

// startCore starts rank r's core (its P2P port o.p2pPort+r, marked
// --data-parallel-rank r on a data-parallel engine), waits until it holds
// its port, and returns the write end of its link: closed, the core ends.
func startCore(self string, o options, r int, done chan<- error) (*os.File, error) {
	ready, readyW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	link, linkW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	coreArgs := []string{"sim", "core", "--p2p-host", o.p2pHost, "--p2p-port", strconv.Itoa(o.p2pPort + r)}
	if o.dp > 1 {
		coreArgs = append(coreArgs, "--data-parallel-rank", strconv.Itoa(r))
	}
	if o.ignoreTerm {
		coreArgs = append(coreArgs, FlagIgnoreTerm)
	}
	cmd := exec.Command(self, coreArgs...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{readyW, link} // fd 3: ready byte out; fd 4: EOF when the front end dies
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start core %d: %w", r, err)
	}
	_ = readyW.Close()
	_ = link.Close()
	go func() { done <- cmd.Wait() }()
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		return nil, fmt.Errorf("core %d did not get ready: %w", r, err)
	}
	return linkW, nil
}

// core holds the P2P port until its link to the front end closes.
func core(args []string) error {
	var host string
	port := -1
	ignoreTerm := false
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--p2p-host":
			i++
			if i < len(args) {
				host = args[i]
			}
		case "--p2p-port":
			i++
			if i < len(args) {
				port, _ = strconv.Atoi(args[i])
			}
		case FlagIgnoreTerm:
			ignoreTerm = true
		}
	}
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		// Like the real core: exit 0 on SIGTERM.
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() { <-term; os.Exit(0) }()
	}
	if port < 0 {
		return errors.New("core: no --p2p-port")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("bind P2P port %d: %w", port, err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	logf("core pid %d holds P2P %s:%d", os.Getpid(), host, port)
	ready := os.NewFile(3, "ready")
	if _, err := ready.Write([]byte{1}); err != nil {
		return fmt.Errorf("tell the front end: %w", err)
	}
	_ = ready.Close()
	_, _ = io.Copy(io.Discard, os.NewFile(4, "link"))
	return nil
}

// Eventually polls cond every 5 ms until it holds (true) or d has passed
// (false): tests wait for a process state instead of sleeping.
func Eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
