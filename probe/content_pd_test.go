package probe_test

import (
	"fmt"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/probe"
)

// TestAPDDecodeLegGivesThePrefillersText: in pd mode the trial's first
// leg is the prefill leg (remote_decoder), which with the content check
// asks for the decode leg's max_tokens, so its text is the prefiller's
// own greedy completion; the decode leg (remote_prefiller) loads the
// parked blocks and must answer the same text. Every trial does, and
// content_matches passes counting them all.
func TestAPDDecodeLegGivesThePrefillersText(t *testing.T) {
	decoder, sources := simCluster(t, 1)
	warmProbe(t, decoder, sources)
	p, err := probe.New(probe.Config{DecoderURL: decoder.url, Sources: sources, Model: "m", Mode: event.ModePD, ContentTokens: 8,
		Interval: 50 * time.Millisecond, SeedTimeout: 5 * time.Second, PullTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	time.Sleep(800 * time.Millisecond)
	got := r.stop(20 * time.Second)
	var samples []event.Sample
	for _, s := range got {
		samples = append(samples, s.Sample)
		if s.Status != 200 || s.SeedStatus != 200 {
			t.Errorf("trial %d: prefill leg %d, decode leg %d %q", s.Trial, s.SeedStatus, s.Status, s.Err)
			continue
		}
		if s.CachedTokens != 384 {
			t.Errorf("trial %d: cached %d, want the 384 tokens the prefill leg parked", s.Trial, s.CachedTokens)
		}
		if s.Content != event.ContentSame {
			t.Errorf("trial %d (cached %d): content %q, decode leg %q, prefill leg %q", s.Trial, s.CachedTokens, s.Content, s.PullText, s.SourceText)
		}
	}
	if len(samples) < 4 {
		t.Fatalf("%d trials in 0.8 s at 20 trials/s", len(samples))
	}
	res := check.ContentMatches(samples, check.ContentRule{On: true})
	want := fmt.Sprintf("all %d pulls that returned 200 gave the source's own completion", len(samples))
	if !res.Passed || res.Detail != want {
		t.Errorf("content_matches: %+v, want a pass: %q", res, want)
	}
	t.Logf("%d PD trials; %s: %s", len(samples), res.Name, res.Detail)
}
