package experiment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"p2pfault/attach"
	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner/session"
)

type simEngine struct {
	name      string
	http, p2p int
	pid       int
}

func (e simEngine) url() string { return "http://127.0.0.1:" + strconv.Itoa(e.http) }

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEngine starts this test binary as `sim serve` in a session of its
// own (as a user's script would) and ends that session at cleanup.
func startEngine(t *testing.T, name string) simEngine {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := simEngine{name: name, http: freeLoopbackPort(t), p2p: freeLoopbackPort(t)}
	kv, _ := json.Marshal(map[string]any{
		"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
		"kv_connector_extra_config": map[string]any{
			"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 209715200,
			"secondary_tiers": []map[string]any{{"type": "p2p", "host": "127.0.0.1", "port": e.p2p}},
		},
	})
	cmd := exec.Command(self, "sim", "serve", "meta-llama/Llama-3.2-1B-Instruct", "--port", strconv.Itoa(e.http),
		"--host", "127.0.0.1", "--block-size", "128", "--max-model-len", "512", "--enable-prompt-tokens-details", "--kv-transfer-config", string(kv),
		"--sim-time-scale", "0.25", "--sim-startup-delay", "0s")
	cmd.Env = append(os.Environ(), "P2PFAULT_TEST_MAIN=1", "PYTHONHASHSEED=42", "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() {
		_, _ = session.Signal(e.pid, syscall.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = session.WaitGone(ctx, e.pid, 10*time.Millisecond)
	})
	c := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := c.Get(e.url() + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer /health in 60 s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sessionStates is session sid's state letters (session.States).
func sessionStates(t *testing.T, sid int) string {
	t.Helper()
	s, err := session.States(sid)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAttachedStallIsResumedByCloseOnEveryWayOut: a kind registered by
// the test stops source-0 through its Target and never resumes it (so
// nothing but the cluster's Close can). When the run is ended by its
// context (the dashboard's q and Ctrl-C/SIGTERM in the CLI all cancel it)
// or by a panic in the kind, Run returns with source-0 running again, and
// the engines p2pfault did not start are all still alive.
func TestAttachedStallIsResumedByCloseOnEveryWayOut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three engines")
	}
	var held atomic.Bool // a kind stopped source-0 (and nothing of it resumes)
	t.Cleanup(fault.Register(&fault.Kind{
		Name: "hold", Order: 98,
		Act: func(f *fault.Fire) error {
			at, err := f.Target.Stop(f.Env.Context())
			held.Store(err == nil)
			f.Env.Record("hold", 0, f.By, err)
			if err == nil {
				f.Env.OpenWindow(at, true)
			}
			return err
		},
	}))
	t.Cleanup(fault.Register(&fault.Kind{
		Name: "holdpanic", Order: 99,
		Act: func(f *fault.Fire) error {
			if _, err := f.Target.Stop(f.Env.Context()); err != nil {
				return err
			}
			held.Store(true)
			panic("a bug in a fault kind while it holds a stall")
		},
	}))
	t.Setenv("P2PFAULT_TEST_MAIN", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	dec, s0, s1 := startEngine(t, "decoder"), startEngine(t, "source-0"), startEngine(t, "source-1")
	dir := t.TempDir()
	yaml := fmt.Sprintf("model: meta-llama/Llama-3.2-1B-Instruct\ndecoder:\n  url: %s\nsources:\n", dec.url())
	for _, s := range []simEngine{s0, s1} {
		yaml += fmt.Sprintf("  - name: %s\n    url: %s\n    p2p: 127.0.0.1:%d\n", s.name, s.url(), s.p2p)
	}
	path := filepath.Join(dir, "attach.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, kind string
		cancel     bool
	}{{"context ended (q, Ctrl-C, SIGTERM)", "hold", true}, {"panic", "holdpanic", false}} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := attach.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			c, err := attach.Open(context.Background(), f, attach.Options{LogDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			exp, err := experiment.New(experiment.Config{
				Case: experiment.CaseNone, TimeScale: 0.25, Timeline: "at 1s " + tt.kind + " source-0",
				Attach: c, OutDir: t.TempDir(),
			})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var seen []string
			stopped := make(chan struct{}, 1)
			evs := exp.Subscribe()
			go func() {
				for ev := range evs {
					b, _ := json.Marshal(ev)
					mu.Lock()
					if ev.Kind != event.KindSamples {
						seen = append(seen, string(b))
					}
					mu.Unlock()
					if ev.Kind == event.KindEngine && ev.Engine.Name == "source-0" && ev.Engine.State == event.StateStopped {
						select {
						case stopped <- struct{}{}:
						default:
						}
					}
				}
			}()
			dump := func() string {
				mu.Lock()
				defer mu.Unlock()
				return strings.Join(seen, "\n")
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { _, err := exp.Run(ctx); done <- err }()
			held.Store(false)
			if tt.cancel {
				deadline := time.Now().Add(20 * time.Second)
				for !strings.Contains(sessionStates(t, s0.pid), "T") {
					if time.Now().After(deadline) {
						t.Fatalf("source-0 was not stopped within 20 s; events:\n%s", dump())
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			if tt.cancel {
				select {
				case <-stopped: // the faces were told
				case <-time.After(10 * time.Second):
					t.Fatalf("no stopped state for source-0 in the events:\n%s", dump())
				}
				cancel()
			}
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return")
			}
			t.Logf("Run returned: %.80v", err)
			if !held.Load() {
				t.Fatalf("the kind never stopped source-0; events:\n%s", dump())
			}
			if !tt.cancel && (err == nil || !strings.Contains(err.Error(), "a bug in a fault kind")) {
				t.Errorf("Run returned %v, want the panic as its error", err)
			}
			if st := sessionStates(t, s0.pid); st == "" || strings.Contains(st, "T") {
				t.Errorf("source-0's session is %q after Run returned, want running", st)
			}
			for _, e := range []simEngine{dec, s0, s1} {
				if _, err := session.Stat(e.pid); err != nil {
					t.Errorf("%s was stopped by the run: %v", e.name, err)
				}
			}
		})
	}
}
