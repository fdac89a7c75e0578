package probe_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/probe"
)

// textCluster is a source answering its seed with seedText and a decoder
// answering its pull with pullText (streamed, in one chunk per word, when
// the pull asks for a stream); it records both request bodies.
type textCluster struct {
	mu            sync.Mutex
	seeds, pulls  []map[string]any
	seedStatus    int
	seedText      string
	pullText      string
	decoder, seed *httptest.Server
}

func newTextCluster(t *testing.T, seedText, pullText string) *textCluster {
	return newTextClusterStatus(t, seedText, pullText, 200)
}

func newTextClusterStatus(t *testing.T, seedText, pullText string, seedStatus int) *textCluster {
	c := &textCluster{seedText: seedText, pullText: pullText, seedStatus: seedStatus}
	record := func(r *http.Request, into *[]map[string]any) map[string]any {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("request body: %v", err)
		}
		c.mu.Lock()
		*into = append(*into, body)
		c.mu.Unlock()
		return body
	}
	c.seed = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r, &c.seeds)
		if c.seedStatus != 200 {
			w.WriteHeader(c.seedStatus)
			fmt.Fprint(w, `{"error":{"message":"no","type":"InternalServerError","code":500}}`)
			return
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"text":%q}],"usage":{"prompt_tokens":400,"prompt_tokens_details":{"cached_tokens":0}}}`, c.seedText)
	}))
	t.Cleanup(c.seed.Close)
	c.decoder = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := record(r, &c.pulls)
		if body["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, word := range strings.SplitAfter(c.pullText, " ") {
				fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"text\":%q}]}\n\n", word)
			}
			fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":400,\"prompt_tokens_details\":{\"cached_tokens\":384}}}\n\ndata: [DONE]\n\n")
			return
		}
		fmt.Fprintf(w, `{"choices":[{"index":0,"text":%q}],"usage":{"prompt_tokens":400,"prompt_tokens_details":{"cached_tokens":384}}}`, c.pullText)
	}))
	t.Cleanup(c.decoder.Close)
	return c
}

// bodies are the requests received, read under the lock the handlers
// write them under.
func (c *textCluster) bodies() (seeds, pulls []map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seeds, c.pulls
}

func (c *textCluster) config(tokens int) probe.Config {
	return probe.Config{DecoderURL: c.decoder.URL, Model: "m", ContentTokens: tokens, SeedTimeout: 2 * time.Second, PullTimeout: 2 * time.Second,
		Sources: []probe.Source{{Index: 0, URL: c.seed.URL, P2PHost: "127.0.0.1", P2PPort: 7777}}}
}

func TestSeedAndPullAskForTheSameGreedyCompletion(t *testing.T) {
	for _, tokens := range []int{8, 0} {
		t.Run(fmt.Sprint("content tokens ", tokens), func(t *testing.T) {
			c := newTextCluster(t, " the of and", " the of and")
			s := oneTrial(t, c.config(tokens))
			seeds, pulls := c.bodies()
			if len(seeds) != 1 || len(pulls) != 1 {
				t.Fatalf("%d seeds, %d pulls", len(seeds), len(pulls))
			}
			seed, pull := seeds[0], pulls[0]
			want := float64(max(tokens, 1)) // 0: the seed's max_tokens 1
			for _, b := range []map[string]any{seed, pull} {
				if b["max_tokens"] != want || b["temperature"] != 0.0 {
					t.Errorf("max_tokens %v temperature %v, want %v and 0", b["max_tokens"], b["temperature"], want)
				}
			}
			delete(pull, "kv_transfer_params")
			if fmt.Sprint(seed) != fmt.Sprint(pull) {
				t.Errorf("the pull asks for another completion than its seed:\nseed %v\npull %v", seed, pull)
			}
			wantContent := event.ContentSame
			if tokens == 0 {
				wantContent = "" // nothing compared
			}
			if s.Content != wantContent || s.PullText != "" || s.SourceText != "" {
				t.Errorf("content %q texts %q / %q, want %q and no texts kept", s.Content, s.PullText, s.SourceText, wantContent)
			}
		})
	}
}

func TestAPullWithOtherTextKeepsBothTexts(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream ", stream), func(t *testing.T) {
			c := newTextCluster(t, " the of and to", " the of was to")
			cfg := c.config(4)
			cfg.Stream = stream
			s := oneTrial(t, cfg)
			if s.Status != 200 || s.Err != "" || s.Content != event.ContentDiffers ||
				s.PullText != " the of was to" || s.SourceText != " the of and to" {
				t.Errorf("sample %+v, want the two texts kept", s)
			}
		})
	}
	t.Run("streamed, the same text in chunks", func(t *testing.T) {
		c := newTextCluster(t, " the of and to", " the of and to")
		cfg := c.config(4)
		cfg.Stream = true
		if s := oneTrial(t, cfg); s.Content != event.ContentSame || s.TTFT <= 0 {
			t.Errorf("sample %+v, want the chunks joined into the seed's text", s)
		}
	})
}

func TestNothingToCompareWithoutASourceCompletion(t *testing.T) {
	c := newTextClusterStatus(t, " a", " b", 500)
	if s := oneTrial(t, c.config(8)); s.SeedStatus != 500 || s.Status != 200 || s.Content != "" || s.PullText != "" {
		t.Errorf("a failed seed: %+v, want no comparison", s)
	}
	// A source that does not answer within the seed timeout.
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(hung.Close)
	d := newTextCluster(t, " a", " a")
	cfg := d.config(8)
	cfg.Sources[0].URL, cfg.SeedTimeout = hung.URL, 100*time.Millisecond
	if s := oneTrial(t, cfg); s.SeedErr == "" || s.Status != 200 || s.Content != "" {
		t.Errorf("a seed that timed out: %+v, want no comparison", s)
	}
}

func TestNegativeContentTokensIsRefused(t *testing.T) {
	c := newTextCluster(t, "", "")
	if _, err := probe.New(c.config(-1)); err == nil || !strings.Contains(err.Error(), "content tokens -1 is negative") {
		t.Errorf("New with -1 content tokens: %v", err)
	}
}
