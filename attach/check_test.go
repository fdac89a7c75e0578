package attach

import (
	"bufio"
	"context"
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

	"p2pfault/exitcode"
)

// standIn starts this binary as a stand-in engine in a session of its own
// that listens on every port given (and answers /health on them), and
// returns its session id.
func standIn(t *testing.T, ports ...int) int {
	t.Helper()
	return standInAs(t, "", ports...)
}

func standInAs(t *testing.T, prefix string, ports ...int) int {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, p := range ports {
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), listenEnv+"="+prefix+strings.Join(addrs, ","), "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	killSessionOnCleanup(t, cmd.Process.Pid)
	if l, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(l) != "listening" {
		t.Fatalf("stand-in said %q", l)
	}
	return cmd.Process.Pid
}

func checkErr(t *testing.T, file string, opts Options) error {
	t.Helper()
	f, err := Parse("attach.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), f, opts)
	if err == nil {
		t.Fatalf("Open accepted:\n%s", file)
	}
	if exitcode.Code(err) != exitcode.Usage {
		t.Errorf("exit code %d, want 2", exitcode.Code(err))
	}
	return err
}

func wantIn(t *testing.T, err error, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error:\n%v\nwant it to contain %q", err, w)
		}
	}
}

func yamlFile(dec string, sources ...string) string {
	return "model: m\ndecoder:\n  url: " + dec + "\nsources:\n" + strings.Join(sources, "")
}

func src(name, url, p2p, faults string) string {
	s := fmt.Sprintf("  - name: %s\n    url: %s\n    p2p: %s\n", name, url, p2p)
	if faults != "" {
		s += "    faults:" + faults + "\n"
	}
	return s
}

func TestCheckUnreachableURLAndNobodyOnP2P(t *testing.T) {
	dec := fakeDecoder(t)
	closed := freePort(t)
	closedURL := "http://127.0.0.1:" + strconv.Itoa(closed)
	shell, _ := exec.LookPath("sh")
	err := checkErr(t, yamlFile(closedURL,
		src("source-0", dec.url(), "127.0.0.1:"+strconv.Itoa(closed), ""),
		src("source-1", dec.url(), "127.0.0.1:"+strconv.Itoa(closed), "\n      kill: ["+shell+"]"),
	), Options{})
	wantIn(t, err,
		"decoder: "+closedURL+" unreachable: ",
		"connection refused",
		"source-0: P2P address 127.0.0.1:"+strconv.Itoa(closed)+": nobody listens on this host",
		"source-1: P2P address 127.0.0.1:"+strconv.Itoa(closed)+": nobody listens (dial tcp",
	)
}

func TestCheckHealthNot200(t *testing.T) {
	dec := fakeDecoder(t)
	// A decoder still loading its model answers /health with 503.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = bufio.NewReader(c).ReadString('\n')
			_, _ = c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			c.Close()
		}
	}()
	bad := "http://" + ln.Addr().String()
	err = checkErr(t, yamlFile(bad, src("source-0", dec.url(), ln.Addr().String(), "\n      kill: [sh]")), Options{})
	wantIn(t, err, "decoder: "+bad+" unreachable: /health answered 503 Service Unavailable")
}

func TestCheckCommandNotFound(t *testing.T) {
	dec := fakeDecoder(t)
	p2p := freePort(t)
	standIn(t, p2p)
	err := checkErr(t, yamlFile(dec.url(), src("source-1", dec.url(), "127.0.0.1:"+strconv.Itoa(p2p),
		"\n      stall: [no-such-kubectl, exec]\n      resume: [sh, -c, 'true']\n      kill: [/no/such/dir/kubectl]")), Options{})
	wantIn(t, err,
		`source-1: stall command: "no-such-kubectl" not found: executable file not found in $PATH`,
		`source-1: kill command: "/no/such/dir/kubectl" not found: `)
	if strings.Contains(err.Error(), "resume command") {
		t.Errorf("a command that exists is reported: %v", err)
	}
}

func TestCheckLocalListenerInP2pfaultsOwnSession(t *testing.T) {
	dec := fakeDecoder(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// This test process stands for p2pfault: a "local" engine in its own
	// session must be refused (in a PID namespace the session reads 0,
	// refused as the system's).
	err = checkErr(t, yamlFile(dec.url(), src("source-0", dec.url(), ln.Addr().String(), "")), Options{})
	wantIn(t, err, "source-0: local faults: pid "+strconv.Itoa(os.Getpid()), "on P2P address "+ln.Addr().String(), "refusing to signal session", "start the engine in a session of its own")
}

func TestCheckLocalProcessNotFound(t *testing.T) {
	dec := fakeDecoder(t)
	// A /proc whose net/tcp lists a listener that no visible process holds:
	// what p2pfault sees of another user's or another PID namespace's engine.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	tcp := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:1E61 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 424242 1 0000000000000000 100 0 0 10 0\n"
	if err := os.WriteFile(filepath.Join(root, "net", "tcp"), []byte(tcp), 0o644); err != nil {
		t.Fatal(err)
	}
	old := procRoot
	procRoot = root
	t.Cleanup(func() { procRoot = old })
	err := checkErr(t, yamlFile(dec.url(), src("source-0", dec.url(), "127.0.0.1:7777", "")), Options{})
	wantIn(t, err, "source-0: local faults: the process listening on P2P address 127.0.0.1:7777 cannot be found in /proc")
}

func TestCheckSourcesSharingASession(t *testing.T) {
	dec := fakeDecoder(t)
	h0, p0, h1, p1 := freePort(t), freePort(t), freePort(t), freePort(t)
	sid := standIn(t, h0, p0, h1, p1)
	u := func(p int) string { return "http://127.0.0.1:" + strconv.Itoa(p) }
	a := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	err := checkErr(t, yamlFile(dec.url(), src("source-0", u(h0), a(p0), ""), src("source-1", u(h1), a(p1), "")), Options{})
	wantIn(t, err, fmt.Sprintf("source-0 and source-1: share session %d", sid), "a local fault of one would hit all of them")
}

func TestCheckHTTPAndP2PInDifferentSessions(t *testing.T) {
	dec := fakeDecoder(t)
	h, p := freePort(t), freePort(t)
	hs, ps := standIn(t, h), standIn(t, p)
	err := checkErr(t, yamlFile(dec.url(), src("source-0", "http://127.0.0.1:"+strconv.Itoa(h), "127.0.0.1:"+strconv.Itoa(p), "")), Options{})
	wantIn(t, err, fmt.Sprintf("source-0: local faults: HTTP port %d is served by pid %d in session %d but P2P address 127.0.0.1:%d by pid %d in session %d", h, hs, hs, p, ps, ps))
}

func TestCheckPassesAGoodClusterQuickly(t *testing.T) {
	dec, srcs := threeEngines(t)
	f, err := Load(writeFile(t, t.TempDir(), dec, srcs, nil))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := Check(context.Background(), f, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("check of 3 engines took %v", time.Since(start).Round(time.Millisecond))
}

// TestCheckSessionOfAJobControlShell: an engine typed into a terminal (a
// job in its own process group of the shell's session) is refused for
// local faults, which would stop or kill the shell.
func TestCheckSessionOfAJobControlShell(t *testing.T) {
	dec := fakeDecoder(t)
	h, p := freePort(t), freePort(t)
	sid := standInAs(t, "job:", h, p)
	err := checkErr(t, yamlFile(dec.url(), src("source-0", "http://127.0.0.1:"+strconv.Itoa(h), "127.0.0.1:"+strconv.Itoa(p), "")), Options{})
	wantIn(t, err, "source-0: local faults: pid ", fmt.Sprintf("session %d is led by pid %d", sid, sid), "not in the engine's process group", "start the engine in a session of its own (setsid)")
}
