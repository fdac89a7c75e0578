package probe

import (
	"strings"
	"testing"
)

// FuzzParseUsage feeds the decoder-answer parser arbitrary bodies: it must
// never panic, and a body it accepts yields non-negative counts.
func FuzzParseUsage(f *testing.F) {
	for _, seed := range []string{
		`{"usage":{"prompt_tokens":400,"prompt_tokens_details":{"cached_tokens":384}}}`,
		`{"usage":{"prompt_tokens":400,"prompt_tokens_details":{"cached_tokens":null}}}`,
		`{"usage":{"prompt_tokens":400,"prompt_tokens_details":null}}`,
		`{"usage":null}`,
		`{"usage":{"prompt_tokens":-1}}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":"384"}}}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":1e99}}}`,
		`[]`, `null`, ``, `<html>`, "{\"usage\":{\"prompt_tokens\":4\xff",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := result{status: 200}
		parseUsage(&r, body, "decoder")
		if r.err == "" && (r.cachedTokens < 0 || r.promptTokens < 0) {
			t.Errorf("accepted %q with cached %d prompt %d", body, r.cachedTokens, r.promptTokens)
		}
		if r.err != "" && !strings.HasPrefix(r.err, "decoder answered") {
			t.Errorf("error %q does not name the decoder", r.err)
		}
		if msg := errorMessage(body); msg == "" {
			t.Errorf("errorMessage(%q) is empty: an error must say something", body)
		}
	})
}
