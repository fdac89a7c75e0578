package probe_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"p2pfault/probe"
)

func TestStreamedProbeAgainstSimEngines(t *testing.T) {
	decoder, sources := simCluster(t, 1)
	p, err := probe.New(probe.Config{
		DecoderURL: decoder.url, Sources: sources, Model: "m", Stream: true,
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
	r.waitSamples("3 trials", atLeast(3)) // 150 ms at 20/s on an idle machine
	got := r.stop(20 * time.Second)
	for _, s := range got {
		if !s.Hit() || s.CachedTokens != 384 || s.PromptTokens != 400 || s.Err != "" {
			t.Errorf("trial %d: status %d cached %d/%d err %q, want a 384-token hit", s.Trial, s.Status, s.CachedTokens, s.PromptTokens, s.Err)
		}
		if s.TTFT <= 0 || s.TTFT > s.Latency {
			t.Errorf("trial %d: TTFT %s, latency %s: want 0 < TTFT ≤ latency", s.Trial, s.TTFT, s.Latency)
		}
	}
}

// streamingDecoder answers every pull with body, after checking the pull
// asked for a stream with the usage chunk; the source answers 200.
func streamingDecoder(t *testing.T, body func(w http.ResponseWriter)) probe.Config {
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"usage":{"prompt_tokens":400}}`)
	}))
	t.Cleanup(src.Close)
	dec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"stream":true,"stream_options":{"include_usage":true}`) {
			t.Errorf("pull is not streamed: %s", b)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		body(w)
	}))
	t.Cleanup(dec.Close)
	return probe.Config{DecoderURL: dec.URL, Model: "m", Stream: true, PullTimeout: 5 * time.Second,
		Sources: []probe.Source{{Index: 0, URL: src.URL, P2PHost: "127.0.0.1", P2PPort: 7777}}}
}

func TestStreamedPullRecordsTTFTAndUsage(t *testing.T) {
	cfg := streamingDecoder(t, func(w http.ResponseWriter) {
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":400,\"prompt_tokens_details\":{\"cached_tokens\":256}}}\n\ndata: [DONE]\n\n")
	})
	s := oneTrial(t, cfg)
	if s.Status != 200 || s.CachedTokens != 256 || s.Err != "" {
		t.Errorf("sample %+v", s)
	}
	// The first token came 300 ms before the end.
	if s.TTFT <= 0 || s.Latency-s.TTFT < 250*time.Millisecond {
		t.Errorf("TTFT %s, latency %s: want the token at once and the end 0.3 s later", s.TTFT, s.Latency)
	}
}

func TestStreamedPullErrorsAreFailures(t *testing.T) {
	t.Run("an error event", func(t *testing.T) {
		s := oneTrial(t, streamingDecoder(t, func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, "data: {\"error\":{\"message\":\"KV load failed\",\"type\":\"InternalServerError\",\"code\":500}}\n\ndata: [DONE]\n\n")
		}))
		if s.Status != 500 || !strings.Contains(s.Err, "decoder streamed an error: KV load failed") || s.TTFT != 0 {
			t.Errorf("sample %+v", s)
		}
	})
	t.Run("a stream cut before [DONE]", func(t *testing.T) {
		s := oneTrial(t, streamingDecoder(t, func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"text\":\" a\"}]}\n\n")
		}))
		if !strings.Contains(s.Err, "stream ended without data: [DONE]") {
			t.Errorf("sample %+v", s)
		}
	})
	t.Run("a stream with no token", func(t *testing.T) {
		s := oneTrial(t, streamingDecoder(t, func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		}))
		if !strings.Contains(s.Err, "stream ended with no token") || s.Hit() {
			t.Errorf("sample %+v", s)
		}
	})
}
