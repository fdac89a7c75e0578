package load_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/load"
	"p2pfault/memnet"
)

// engine is a fake engine on an in-memory network: it answers /v1/models
// with its max_model_len and keeps the prompts it was sent.
type engine struct {
	url     string
	mu      sync.Mutex
	prompts [][]int
}

func startEngine(t *testing.T, fab *memnet.Fabric, maxLen int, status int) *engine {
	e := &engine{}
	ln, err := fab.Host("engine").Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"data":[{"id":"m","max_model_len":%d}]}`, maxLen)
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model     string `json:"model"`
			Prompt    []int  `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Model != "m" || body.MaxTokens != 1 {
			http.Error(w, fmt.Sprintf("bad request %+v: %v", body, err), http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.prompts = append(e.prompts, body.Prompt)
		e.mu.Unlock()
		// A request's service time, or until its client goes away.
		tm := time.NewTimer(100 * time.Millisecond)
		defer tm.Stop()
		select {
		case <-r.Context().Done():
		case <-tm.C:
			w.WriteHeader(status)
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return e
}

// TestPromptsAreAsLongAsTheEngineAllows: with no length asked, each
// prompt is the engine's max_model_len less the completion token, and
// every prompt is a fresh one.
func TestPromptsAreAsLongAsTheEngineAllows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		e := startEngine(t, fab, 512, http.StatusOK)
		g, err := load.New(load.Config{URL: e.url, Model: "m", Network: fab.Host("client"), Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := g.Config().PromptTokens; got != 511 {
			t.Fatalf("prompt tokens %d, want 511 (512 less 1 completion token)", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 450*time.Millisecond)
		defer cancel()
		st := g.Run(ctx, 0, nil)
		if st.Sent != 10 || st.Answered != 8 || st.Cancelled != 2 {
			t.Errorf("stats %+v, want 2 clients x 4 answered in 450 ms of 100 ms requests, 2 cut off", st)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		seen := map[string]bool{}
		for _, p := range e.prompts {
			if len(p) != 511 {
				t.Fatalf("a prompt of %d tokens, want 511", len(p))
			}
			seen[fmt.Sprint(p[:8])] = true
		}
		if len(seen) != len(e.prompts) {
			t.Errorf("%d distinct prompts of %d: want each fresh", len(seen), len(e.prompts))
		}
	})
}

func TestLoadErrorsNameWhatIsWrong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		e := startEngine(t, fab, 512, http.StatusServiceUnavailable)
		g, _ := load.New(load.Config{URL: e.url, Model: "m", Network: fab.Host("client"), PromptTokens: 600})
		if err := g.Prepare(context.Background()); err == nil || !strings.Contains(err.Error(), "a prompt of 600 tokens does not fit its max_model_len 512") {
			t.Errorf("Prepare: %v, want the prompt that does not fit named", err)
		}
		g, _ = load.New(load.Config{URL: e.url, Model: "m", Network: fab.Host("client"), Concurrency: 1})
		if err := g.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		st := g.Run(ctx, 0, nil)
		if st.Failed != 1 || st.Answered != 0 || !strings.Contains(st.LastErr, "answered 503") {
			t.Errorf("stats %+v, want the one 503 counted failed and named", st)
		}
	})
	for _, c := range []struct {
		cfg  load.Config
		want string
	}{
		{load.Config{}, "no engine URL"},
		{load.Config{URL: "http://x", Concurrency: -1}, "concurrency -1 is negative"},
		{load.Config{URL: "http://x", PromptTokens: -5}, "prompt length -5 is negative"},
	} {
		if _, err := load.New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
}
