package sim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"p2pfault/sim/link"
	"p2pfault/sim/simlog"
)

// inProcess is one engine with its front end and core in this process,
// joined by an in-memory link: the same code as the two processes, minus
// exec and signals.
type inProcess struct {
	fe      *frontEnd
	handler http.Handler
	host    string
	port    int
}

func startInProcess(tb testing.TB, args ...string) *inProcess {
	tb.Helper()
	var f serveFlags
	fs := newServeFlagSet(&f)
	base := []string{"--block-size", "128", "--max-model-len", "512", "--enable-prompt-tokens-details",
		"--sim-startup-delay", "0", "--kv-transfer-config",
		strings.Replace(kvConfig, "4294967296", "1099511627776", 1)} // room for any b.N
	if err := fs.Parse(append(base, args...)); err != nil {
		tb.Fatal(err)
	}
	cfg, err := f.resolve("m", func(k string) string { return map[string]string{"PYTHONHASHSEED": "42"}[k] })
	if err != nil {
		tb.Fatal(err)
	}
	log := simlog.New(io.Discard)
	front, back := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := runCore(ctx, coreConfig{Engine: cfg.Engine}, back, log); err != nil {
			tb.Error(err)
		}
	}()
	l := link.New(front)
	fe := newFrontEnd(cfg, []*link.Conn{l}, log)
	tb.Cleanup(func() {
		cancel()
		l.Close()
		wg.Wait()
	})
	select {
	case m := <-fe.cores[0].startup:
		if m.Type != link.TypeReady {
			tb.Fatalf("core failed: %s", m.Message)
		}
		p := &inProcess{fe: fe, handler: fe.routes()}
		if h, port, ok := strings.Cut(m.P2PID, ":"); ok {
			p.host = h
			fmt.Sscan(port, &p.port)
		}
		return p
	case <-time.After(10 * time.Second):
		tb.Fatal("in-process core not ready")
		return nil
	}
}

func (p *inProcess) post(tb testing.TB, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body))
	w := httptest.NewRecorder()
	p.handler.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		tb.Fatalf("status %d: %s", w.Code, w.Body)
	}
	return w
}

func completionBody(prompt string) string {
	return fmt.Sprintf(`{"model":"m","prompt":%q,"max_tokens":1,"temperature":0}`, prompt)
}

func pullBody(prompt string, src *inProcess, i int) string {
	return fmt.Sprintf(`{"model":"m","prompt":%q,"max_tokens":1,"temperature":0,"kv_transfer_params":{"remote_kv_source":{"kv_request_id":"b-%d","remote_host":%q,"remote_port":%d}}}`,
		prompt, i, src.host, src.port)
}

// BenchmarkCompletionLocalPrefill: a unique 400-token prompt prefilled
// locally (default costs: 26 µs/token prefill, 2 ms decode, 5 ms tick).
func BenchmarkCompletionLocalPrefill(b *testing.B) {
	e := startInProcess(b)
	bodies := make([]string, b.N)
	for i := range bodies {
		bodies[i] = completionBody(words(fmt.Sprint("local-", i), 400))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if w := e.post(b, bodies[i]); !strings.Contains(w.Body.String(), `"cached_tokens":0`) {
			b.Fatalf("unexpected cache hit: %s", w.Body)
		}
	}
}

// BenchmarkCompletionP2PHit: a 400-token prompt seeded on a source, pulled
// into the decoder over loopback P2P (lookup, fetch, 12 MiB transfer at
// 10 GB/s), 384 tokens cached. The session is warm.
func BenchmarkCompletionP2PHit(b *testing.B) {
	src := startInProcess(b)
	dec := startInProcess(b)
	warmBody := words("bench-warm", 400)
	src.post(b, completionBody(warmBody))
	dec.post(b, pullBody(warmBody, src, -1))
	bodies := make([]string, b.N)
	for i := range bodies {
		p := words(fmt.Sprint("p2p-", i), 400)
		src.post(b, completionBody(p))
		bodies[i] = pullBody(p, src, i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if w := dec.post(b, bodies[i]); !strings.Contains(w.Body.String(), `"cached_tokens":384`) {
			b.Fatalf("pull did not hit: %s", w.Body)
		}
	}
}

// p2pHitBodies seeds b.N unique 400-token prompts on src and returns the
// decoder's pull bodies for them, with extra fields before the closing brace.
func p2pHitBodies(b *testing.B, src, dec *inProcess, tag, extra string) []string {
	warmBody := words(tag+"-warm", 400)
	src.post(b, completionBody(warmBody))
	dec.post(b, pullBody(warmBody, src, -1))
	bodies := make([]string, b.N)
	for i := range bodies {
		p := words(fmt.Sprint(tag, "-", i), 400)
		src.post(b, completionBody(p))
		body := pullBody(p, src, i)
		bodies[i] = strings.Replace(body, `"max_tokens":1,`, `"max_tokens":16,`, 1)
		bodies[i] = strings.TrimSuffix(bodies[i], "}") + extra + "}"
	}
	return bodies
}

// BenchmarkCompletionP2PHit16Tokens: as BenchmarkCompletionP2PHit, with 16
// generated tokens answered whole: the baseline of the streamed one below.
func BenchmarkCompletionP2PHit16Tokens(b *testing.B) {
	src, dec := startInProcess(b), startInProcess(b)
	bodies := p2pHitBodies(b, src, dec, "p2p16", "")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if w := dec.post(b, bodies[i]); !strings.Contains(w.Body.String(), `"cached_tokens":384`) {
			b.Fatalf("pull did not hit: %s", w.Body)
		}
	}
}

// BenchmarkStreamedCompletionP2PHit16Tokens: the same pull streamed: 16
// token events as the engine samples them (2 ms each, seen on 5 ms ticks),
// the usage chunk and [DONE].
func BenchmarkStreamedCompletionP2PHit16Tokens(b *testing.B) {
	src, dec := startInProcess(b), startInProcess(b)
	bodies := p2pHitBodies(b, src, dec, "stream16", `,"stream":true,"stream_options":{"include_usage":true}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := dec.post(b, bodies[i])
		if body := w.Body.String(); !strings.Contains(body, `"cached_tokens":384`) || strings.Count(body, "data: ") != 18 {
			b.Fatalf("streamed pull did not hit or lacks events: %s", body)
		}
	}
}

// BenchmarkThreeEnginesReady: wall time from starting three engine
// processes (front end + core each, no simulated model load) until all
// three log "engine ready".
func BenchmarkThreeEnginesReady(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		var wg sync.WaitGroup
		engines := make([]*engineProc, 3)
		for j := range engines {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				engines[j] = startEngine(b, fmt.Sprint("engine-", j), engineOpts{})
			}(j)
		}
		wg.Wait()
		total += time.Since(start)
		b.StopTimer()
		for _, e := range engines {
			if e != nil {
				e.kill(b)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s-to-ready/op")
}
