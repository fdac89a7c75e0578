package attach

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/internal/sessiontest"
	"p2pfault/runner/session"
	"p2pfault/sim"
)

// replacer is this test binary as a source's replace command, as a
// kubectl or ssh one would be: it SIGKILLs the old engine's session, starts
// a new simulated engine on new ports in a session of its own (detached:
// it outlives the command) and, once it answers /health, prints a line of
// chatter and then `HOST:PORT P2P_HOST:P2P_PORT`. args are the filled-in
// placeholders, echoed on the chatter line.
func replacer(oldSid string, args []string) int {
	sid, err := strconv.Atoi(oldSid)
	if err != nil || sid <= 1 {
		fmt.Println("bad session", oldSid)
		return 2
	}
	_, _ = session.Signal(sid, unix.SIGKILL)
	httpPort, p2pPort := pick(), pick()
	self, _ := os.Executable()
	logf, err := os.Create(filepath.Join(os.TempDir(), fmt.Sprintf("replaced-%d.log", httpPort)))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cmd := exec.Command(self, "sim", "serve", "meta-llama/Llama-3.2-1B-Instruct",
		"--port", strconv.Itoa(httpPort), "--host", "127.0.0.1",
		"--block-size", "128", "--max-model-len", "512", "--enable-prompt-tokens-details",
		"--kv-transfer-config", kvConfig(p2pPort), "--sim-time-scale", "0.05")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, replacerEnv+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, sim.StandaloneEnv+"=1", "PYTHONHASHSEED=42", "GORACE=atexit_sleep_ms=0")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return 1
	}
	o := Options{}.withDefaults()
	url := "http://127.0.0.1:" + strconv.Itoa(httpPort)
	for deadline := time.Now().Add(30 * time.Second); health(context.Background(), o, url) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			fmt.Println("the new engine did not come up")
			return 1
		}
	}
	fmt.Printf("replaced %s: new engine pid %d\n", strings.Join(args, " "), cmd.Process.Pid)
	fmt.Printf("127.0.0.1:%d 127.0.0.1:%d\n", httpPort, p2pPort)
	return 0
}

func pick() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestCommandReplaceMovesTheSourceToTheAddressItPrinted: a replace command
// ends the engine and starts another on new ports; the source is then named
// by the address the command printed (its URL, P2P address, the
// placeholders of later commands), once the new engine answers there.
func TestCommandReplaceMovesTheSourceToTheAddressItPrinted(t *testing.T) {
	old := startEngine(t, "source-0")
	dec := fakeDecoder(t)
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(replacerEnv, strconv.Itoa(old.pid))
	faults := fmt.Sprintf("\n      replace: [%s, \"{name}\", \"{port}\", \"{p2p_port}\"]", self)
	path := writeFile(t, dir, dec, []engine{old}, map[string]string{"source-0": faults})
	c := openLocal(t, path, Options{LogDir: dir, ReadyTimeout: 20 * time.Second})
	src, _ := c.Source("source-0")
	if err := src.CanReplace(); err != nil {
		t.Fatalf("CanReplace: %v", err)
	}
	var signalledAt time.Time
	readyAt, err := src.Replace(context.Background(), func(at time.Time, err error) {
		if err != nil {
			t.Errorf("signalled with %v", err)
		}
		signalledAt = at
	})
	if err != nil {
		t.Fatalf("replace: %v", err)
	}
	s := src.Source()
	if l, err := FindListener(s.P2PHost, s.P2PPort); err == nil {
		killSessionOnCleanup(t, l.Sid)
	}
	if signalledAt.IsZero() || readyAt.Before(signalledAt) {
		t.Errorf("signalled at %v, ready at %v", signalledAt, readyAt)
	}
	if s.Port == old.http || s.P2PPort == old.p2p || s.URL == old.url() {
		t.Errorf("after replace the source is %s / %s, it was %s / %s: want the new address", s.URL, s.P2P, old.url(), old.p2pAddr())
	}
	if src.HTTPURL() != s.URL || src.P2PPort() != s.P2PPort || s.P2P != net.JoinHostPort(s.P2PHost, strconv.Itoa(s.P2PPort)) {
		t.Errorf("HTTPURL %s P2PPort %d, source %+v: want one address", src.HTTPURL(), src.P2PPort(), s)
	}
	if err := src.Health(context.Background()); err != nil {
		t.Errorf("the new engine's /health: %v", err)
	}
	if live, _ := session.Live(old.pid); len(live) > 0 {
		t.Errorf("the old engine's session %d still has %v", old.pid, live)
	}
	in := src.State()
	if in.URL != s.URL || in.HTTPPort != s.Port || in.P2PPort != s.P2PPort || in.Restarts != 1 {
		t.Errorf("state %+v, want the new address and 1 restart", in)
	}
	// Later commands fill their placeholders with the new address.
	if got := s.Fill([]string{"{port}", "{p2p_port}"}, fault.Grain{}); got[0] != strconv.Itoa(s.Port) || got[1] != strconv.Itoa(s.P2PPort) {
		t.Errorf("placeholders after the replace: %v", got)
	}
}

// TestReplaceCommandWithoutAnAddressIsNotTaken: a replace command whose
// output names no new engine leaves the source where it was, and its error
// says what the command printed.
func TestReplaceCommandWithoutAnAddressIsNotTaken(t *testing.T) {
	e := startEngine(t, "source-0")
	dec := fakeDecoder(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "argv.log")
	k := fakeKubectl(t, dir, log)
	path := writeFile(t, dir, dec, []engine{e}, map[string]string{"source-0": commandsYAML(k, fault.ActionReplace)})
	c := openLocal(t, path, Options{LogDir: dir, ReadyTimeout: 5 * time.Second})
	src, _ := c.Source("source-0")
	_, err := src.Replace(context.Background(), func(time.Time, error) { t.Error("signalled, but no new engine was named") })
	if err == nil || !errors.Is(err, fault.ErrNotTaken) || !strings.Contains(err.Error(), "no line `HOST:PORT P2P_HOST:P2P_PORT`") ||
		!strings.Contains(err.Error(), "fake kubectl: replace source-0") {
		t.Errorf("replace: %v, want a not-taken error quoting the output", err)
	}
	if src.HTTPURL() != e.url() || src.P2PPort() != e.p2p {
		t.Errorf("the source moved to %s / %d", src.HTTPURL(), src.P2PPort())
	}
}

// TestLocalSourcesRefuseReplace: a local source is restarted from its
// /proc command line, so a run refuses replace on it before it starts,
// with the reason, and so does a commands source without a replace command.
func TestLocalSourcesRefuseReplace(t *testing.T) {
	dec, srcs := fakeDecoder(t), []engine{startEngine(t, "source-0"), startEngine(t, "source-1")}
	dir := t.TempDir()
	k := fakeKubectl(t, dir, filepath.Join(dir, "argv.log"))
	path := writeFile(t, dir, dec, srcs, map[string]string{"source-1": commandsYAML(k, fault.ActionKill)})
	c := openLocal(t, path, Options{LogDir: dir})
	local, _ := c.Source("source-0")
	if err := local.CanReplace(); err == nil || !strings.Contains(err.Error(), "a local source is restarted from its own command line") {
		t.Errorf("CanReplace on a local source: %v", err)
	}
	k2, _ := fault.Lookup(fault.ActionReplace)
	if err := k2.Can(local); err == nil || err.Error() != local.CanReplace().Error() {
		t.Errorf("the kind's Can on a local source: %v", err)
	}
	for i, want := range []string{
		"source-0 (source-0): replace: a local source is restarted from its own command line, and p2pfault cannot know how to start it on other ports",
		"source-1 (source-1): replace: the attach file gives no replace command for this source (timeline step \"at 1s replace source-1\")",
	} {
		tl, err := fault.Parse(fmt.Sprintf("at 1s replace source-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Plan(tl)
		if err == nil || exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), want) {
			t.Errorf("plan of a replace of source-%d: %v, want a usage error containing %q", i, err, want)
		}
	}
	if _, err := local.Replace(context.Background(), nil); err == nil {
		t.Error("Replace on a local source did something")
	}
	if st := sessiontest.States(t, srcs[0].pid); len(st) != 2 || strings.Contains(st, "T") {
		t.Errorf("the local source's session %q after a refused replace", st)
	}
}

func TestParseAddress(t *testing.T) {
	for _, tt := range []struct {
		out, want, err string
	}{
		{"10.0.0.5:8100 10.0.0.5:7777\n", "http://10.0.0.5:8100 10.0.0.5:7777", ""},
		{"deleting pod\nstarting on new ports\npod-b.svc:8000 pod-b.svc:7777", "http://pod-b.svc:8000 pod-b.svc:7777", ""},
		{"a:1 b:2\nc:3 d:4\nbye", "http://c:3 d:4", ""},
		{"[::1]:8100 [::1]:7777", "http://[::1]:8100 ::1:7777", ""},
		{"", "", "it printed nothing"},
		{"done\n8100 7777", "", `it printed "done\n8100 7777"`},
		{"h:0 h:7777", "", "no line"},
	} {
		a, err := ParseAddress(tt.out, "http")
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseAddress(%q) = %+v, %v; want an error with %q", tt.out, a, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAddress(%q): %v", tt.out, err)
			continue
		}
		if got := a.URL + " " + a.P2PHost + ":" + strconv.Itoa(a.P2PPort); got != tt.want {
			t.Errorf("ParseAddress(%q) = %s, want %s", tt.out, got, tt.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	base := "model: m\ndecoder:\n  url: http://127.0.0.1:8200\nsources:\n  - name: s\n    url: http://127.0.0.1:8100\n    p2p: 127.0.0.1:7777\n"
	f, err := Parse("a.yaml", []byte("mode: pd\n"+base))
	if err != nil || f.Mode != "pd" {
		t.Errorf("mode: pd: %+v, %v", f, err)
	}
	if f, err := Parse("a.yaml", []byte(base)); err != nil || f.Mode != "" {
		t.Errorf("no mode: %+v, %v", f, err)
	}
	_, err = Parse("a.yaml", []byte("mode: nixl\n"+base))
	if err == nil || !strings.Contains(err.Error(), `a.yaml:1: mode "nixl": want p2p`) {
		t.Errorf("mode: nixl: %v", err)
	}
}
