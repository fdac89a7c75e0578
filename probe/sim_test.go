package probe_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"p2pfault/internal/syncbuf"
	"p2pfault/probe"
)

// simEngine is one `p2pfault sim serve` (front end and engine core) in its
// own session, so the session id is the front end's pid.
type simEngine struct {
	url     string
	p2pHost string
	p2pPort int
	sid     int // the session: signal every member with kill(-sid)
	log     *syncbuf.Buffer
}

var simReady = regexp.MustCompile(`engine ready: serving model \S+ on http://(\S+), P2P identity (\S+):(\d+)`)

// startSim starts a sim engine on free loopback ports (HTTP and P2P port 0)
// and waits for its ready line; extra are more `sim serve` flags. Cleanup
// kills its whole session by id (SIGKILL ends stopped members too) and
// waits until no member is left, also when the test failed.
func startSim(t testing.TB, name string, extra ...string) simEngine {
	t.Helper()
	const kv = `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":1073741824,"secondary_tiers":[{"type":"p2p","host":"127.0.0.1","port":0}]}}`
	args := append([]string{"sim", "serve", "m", "--host", "127.0.0.1", "--port", "0",
		"--block-size", "128", "--max-model-len", "512", "--enable-prompt-tokens-details",
		"--sim-startup-delay", "0", "--kv-transfer-config", kv}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "P2PFAULT_TEST_MAIN=1", "PYTHONHASHSEED=42")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	log := &syncbuf.Buffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	sid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-sid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (session %d) did not exit after SIGKILL", name, sid)
		}
		waitSessionEmpty(t, sid)
		if t.Failed() {
			t.Logf("%s log:\n%s", name, log)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := simReady.FindStringSubmatch(log.String()); m != nil {
			port, _ := strconv.Atoi(m[3])
			return simEngine{url: "http://" + m[1], p2pHost: m[2], p2pPort: port, sid: sid, log: log}
		}
		select {
		case <-exited:
			t.Fatalf("%s exited before ready:\n%s", name, log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within 30s:\n%s", name, log)
		}
	}
}

// waitSessionEmpty waits until no live process is in session sid: the
// engine core is reaped by init, not by this process.
func waitSessionEmpty(t testing.TB, sid int) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := sessionMembers(sid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("session %d still has processes %v", sid, left)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sessionMembers lists the pids in session sid that are not zombies, from
// /proc/PID/stat (fields counted after the command name's ')').
func sessionMembers(sid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp session ...
		if len(f) < 4 || f[0] == "Z" {
			continue
		}
		if n, _ := strconv.Atoi(f[3]); n == sid {
			pid, _ := strconv.Atoi(strings.TrimSpace(s[:strings.IndexByte(s, '(')]))
			out = append(out, pid)
		}
	}
	return out
}

// simCluster is a decoder and n sources, all sim engines.
func simCluster(t testing.TB, n int) (decoder simEngine, sources []probe.Source) {
	t.Helper()
	var wg sync.WaitGroup
	engines := make([]simEngine, n+1)
	for i := range engines {
		wg.Go(func() { engines[i] = startSim(t, fmt.Sprintf("engine-%d", i)) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, e := range engines[1:] {
		sources = append(sources, probe.Source{Index: i, URL: e.url, P2PHost: e.p2pHost, P2PPort: e.p2pPort})
	}
	return engines[0], sources
}

func TestProbeAgainstSimEngines(t *testing.T) {
	decoder, sources := simCluster(t, 2)
	p, err := probe.New(probe.Config{
		DecoderURL: decoder.url, Sources: sources, Model: "m",
		Interval: 50 * time.Millisecond, SeedTimeout: 5 * time.Second, PullTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	if err := p.Warmup(context.Background(), 20*time.Second); err != nil {
		t.Fatalf("Warmup against sim engines: %v", err)
	}
	r := startRun(t, p)
	r.waitSamples("10 trials", atLeast(10)) // 500 ms at 2 sources × 20/s on an idle machine
	got := r.stop(20 * time.Second)
	for _, s := range got {
		// 400 tokens = 3 whole blocks of 128 pulled over P2P.
		if !s.Hit() || s.CachedTokens != 384 || s.PromptTokens != 400 || s.Err != "" || s.SeedErr != "" {
			t.Errorf("source %d trial %d: status %d cached %d/%d err %q seed err %q, want a 384-token hit",
				s.Source, s.Trial, s.Status, s.CachedTokens, s.PromptTokens, s.Err, s.SeedErr)
		}
		if s.ServiceTime <= 0 || s.ServiceTime > s.Latency {
			t.Errorf("trial %d: service time %s, latency %s: want 0 < service ≤ latency", s.Trial, s.ServiceTime, s.Latency)
		}
	}
}
