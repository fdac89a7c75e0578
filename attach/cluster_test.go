package attach

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/internal/sessiontest"
	"p2pfault/runner/session"
)

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
	dec, s0, s1 := startEngineAt(t, "decoder", "0.25"), startEngineAt(t, "source-0", "0.25"), startEngineAt(t, "source-1", "0.25")
	dir := t.TempDir()
	path := writeFile(t, dir, dec, []engine{s0, s1}, nil)
	for _, tt := range []struct {
		name, kind string
		cancel     bool
	}{{"context ended (q, Ctrl-C, SIGTERM)", "hold", true}, {"panic", "holdpanic", false}} {
		t.Run(tt.name, func(t *testing.T) {
			c := openLocal(t, path, Options{LogDir: dir})
			exp, err := experiment.New(experiment.Config{
				Case: fault.CaseNone, TimeScale: 0.25, Timeline: "at 1s " + tt.kind + " source-0",
				Cluster: c, OutDir: t.TempDir(),
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
				for !strings.Contains(sessiontest.States(t, s0.pid), "T") {
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
			if st := sessiontest.States(t, s0.pid); st == "" || strings.Contains(st, "T") {
				t.Errorf("source-0's session is %q after Run returned, want running", st)
			}
			for _, e := range []engine{dec, s0, s1} {
				if _, err := session.Stat(e.pid); err != nil {
					t.Errorf("%s was stopped by the run: %v", e.name, err)
				}
			}
		})
	}
}

// localDecoder is an attached engine that is this process itself: an
// HTTP server answering /health on a loopback port, found in /proc as a
// local engine.
func localDecoder(b *testing.B) *Target {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	t := newTarget(Source{Name: "decoder", Endpoint: Endpoint{URL: "http://127.0.0.1:" + strconv.Itoa(port), Host: "127.0.0.1", Port: port}},
		Options{}.withDefaults(), event.RoleDecoder, 0)
	t.local = true
	return t
}

// BenchmarkAttachedRefresh is one engine's share of a poll round: /health
// and the /proc check, with the listener cached (every round but the
// first and those after a restart) and cold (the fd scan of /proc).
func BenchmarkAttachedRefresh(b *testing.B) {
	t := localDecoder(b)
	ctx := context.Background()
	for _, cold := range []bool{false, true} {
		name := "cached"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			t.refresh(ctx, time.Second)
			if in := t.State(); in.Pid == 0 || in.State != event.StateReady {
				b.Fatalf("state %+v: want this process, ready", in)
			}
			for b.Loop() {
				if cold {
					t.forget()
				}
				t.refresh(ctx, time.Second)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/refresh")
		})
	}
}

// BenchmarkAttachedState is what every fault's Changed costs per engine:
// the cached state and one /proc/PID/stat read.
func BenchmarkAttachedState(b *testing.B) {
	t := localDecoder(b)
	t.refresh(context.Background(), time.Second)
	for b.Loop() {
		_ = t.State()
	}
}
