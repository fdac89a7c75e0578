package check

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// pulls are n samples through decoder d, one a second from start, each
// hitting or not and taking lat.
func pulls(d int, start time.Duration, n int, hit bool, lat time.Duration) []event.Sample {
	var out []event.Sample
	for i := range n {
		s := event.Sample{Decoder: d, Start: start + time.Duration(i)*time.Second, Status: 200, Latency: lat}
		if hit {
			s.CachedTokens = 16
		}
		out = append(out, s)
	}
	return out
}

func resultsByName(rs []event.Result) map[string]event.Result {
	m := map[string]event.Result{}
	for _, r := range rs {
		m[r.Name] = r
	}
	return m
}

// TestDecoderChecks: a window on decoder-1 from 10 s to 20 s. The healthy
// decoders' check takes only the pulls through the other decoders started
// in the window, and fails on a miss rate or on a slow pull; the recovery
// check takes only decoder-1's pulls after the window, and fails when they
// miss or there are none; a run of one decoder has no healthy check, and a
// window that never closed no recovery check.
func TestDecoderChecks(t *testing.T) {
	b := DefaultBounds()
	w := []DecoderWindow{{Decoder: 1, Kind: "stall", Start: 10 * time.Second, End: 20 * time.Second}}
	var good []event.Sample
	good = append(good, pulls(0, 10*time.Second, 10, true, 50*time.Millisecond)...)
	good = append(good, pulls(1, 10*time.Second, 10, false, 9*time.Second)...) // the faulted decoder's own: not judged healthy
	good = append(good, pulls(1, 20*time.Second, 10, true, 50*time.Millisecond)...)
	got := resultsByName(DecoderChecks(good, w, b, 2, time.Minute))
	for _, n := range []string{NameHealthyDecoders, NameDecoderRecovers} {
		if r := got[n]; !r.Passed || !strings.Contains(r.Detail, "10 of 10") {
			t.Errorf("%s = %+v, want passed on 10 of 10", n, r)
		}
	}

	missing := append(pulls(0, 10*time.Second, 10, false, 50*time.Millisecond), pulls(1, 20*time.Second, 10, false, 0)...)
	got = resultsByName(DecoderChecks(missing, w, b, 2, time.Minute))
	for _, n := range []string{NameHealthyDecoders, NameDecoderRecovers} {
		if r := got[n]; r.Passed || !strings.Contains(r.Detail, "0 of 10") {
			t.Errorf("%s = %+v, want failed on 0 of 10", n, r)
		}
	}

	slow := pulls(0, 10*time.Second, 10, true, b.HealthyMax+time.Second)
	if r := resultsByName(DecoderChecks(slow, w, b, 2, time.Minute))[NameHealthyDecoders]; r.Passed {
		t.Errorf("healthy pulls over HealthyMax passed: %+v", r)
	}
	if r := resultsByName(DecoderChecks(slow, w, b, 2, time.Minute))[NameDecoderRecovers]; r.Passed || !r.Empty {
		t.Errorf("no pull through decoder-1 after the window: %+v, want failed and empty", r)
	}

	one := DecoderChecks(pulls(1, 20*time.Second, 5, true, 0), w, b, 1, time.Minute)
	if len(one) != 1 || one[0].Name != NameDecoderRecovers || !one[0].Passed {
		t.Errorf("one decoder: %+v, want only %s, passed", one, NameDecoderRecovers)
	}
	open := []DecoderWindow{{Decoder: 1, Kind: "remove", Start: 10 * time.Second}}
	if rs := DecoderChecks(good, open, b, 2, time.Minute); len(rs) != 1 || rs[0].Name != NameHealthyDecoders {
		t.Errorf("a window left open: %+v, want only %s", rs, NameHealthyDecoders)
	}
}
