package fault

import (
	"strings"
	"testing"
	"time"
)

func TestLinkKindWords(t *testing.T) {
	for _, tc := range []struct {
		in     string
		d, j   time.Duration
		errHas string
	}{
		{in: "50ms", d: 50 * time.Millisecond},
		{in: "50ms±10ms", d: 50 * time.Millisecond, j: 10 * time.Millisecond},
		{in: "50ms+-10ms", d: 50 * time.Millisecond, j: 10 * time.Millisecond},
		{in: "5ms±9ms", errHas: "jitter from 0 to the latency"},
		{in: "-5ms", errHas: "want a latency"},
		{in: "fast", errHas: "want a latency"},
	} {
		d, j, err := ParseLatency(tc.in)
		switch {
		case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas)):
			t.Errorf("ParseLatency(%q) = %v, want an error with %q", tc.in, err, tc.errHas)
		case tc.errHas == "" && (err != nil || d != tc.d || j != tc.j):
			t.Errorf("ParseLatency(%q) = %v, %v, %v; want %v, %v", tc.in, d, j, err, tc.d, tc.j)
		}
	}
	for in, want := range map[string]float64{"100KB/s": 1e5, "1MB/s": 1e6, "1.5MB/s": 1.5e6, "512B/s": 512} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"fast", "0MB/s", "-1KB/s", "1Mb"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q): no error", bad)
		}
	}
	if typ, d, err := parseMsgDelay("transfer_done:2s"); err != nil || typ != "transfer_done" || d != 2*time.Second {
		t.Errorf("parseMsgDelay: %q %v %v", typ, d, err)
	}
	for _, bad := range []string{"fetch", "hits:2s", "fetch:-1s", "fetch:0s"} {
		if _, _, err := parseMsgDelay(bad); err == nil {
			t.Errorf("parseMsgDelay(%q): no error", bad)
		}
	}
}

// TestLinkKindsParseAsTimelineSteps: every link kind is a timeline word
// on a source, a rank and a pair, with its ARG where it takes one, and a
// timeline that uses one says so (HasLink) without counting as a network
// cut of a pair (HasPair).
func TestLinkKindsParseAsTimelineSteps(t *testing.T) {
	tl, err := Parse("at 1s mute source-0 for 2s; at 4s hold-ack source-0/rank1 for 1s; at 6s drop transfer_done source-0 from decoder-1 for 1s;" +
		" at 8s delay fetch:2s source-1; at 9s unlink source-1; at 10s late-fetch source-0 for 1s; at 12s latency 50ms±5ms source-0 for 1s;" +
		" at 14s bandwidth 1MB/s source-0 for 1s; at 16s reset source-0; at 17s slow-close 3s source-0 for 1s")
	if err != nil {
		t.Fatal(err)
	}
	if !tl.HasLink() || tl.HasPair() {
		t.Errorf("HasLink %v HasPair %v, want true, false", tl.HasLink(), tl.HasPair())
	}
	if _, err := Parse("at 1s partition source-0 from decoder-1"); err != nil {
		t.Fatal(err)
	}
	if tl, _ := Parse("at 1s stall source-0 for 1s"); tl.HasLink() {
		t.Error("a stall counts as a link kind")
	}
}

// TestNeedsLinksButForWhatTheClusterShapes: on a cluster that shapes its
// packets itself, latency, bandwidth and unlink need no link of the
// run's; any other link kind still does, and elsewhere every one does.
func TestNeedsLinksButForWhatTheClusterShapes(t *testing.T) {
	for _, tt := range []struct {
		tl                   string
		shaped, unshapedWant bool
	}{
		{"at 1s latency 50ms source-0 for 1s; at 3s bandwidth 1MB/s source-1; at 4s unlink source-1", false, true},
		{"at 1s latency 50ms source-0 for 1s; at 3s mute source-1 for 1s", true, true},
		{"at 1s stall source-0 for 1s", false, false},
	} {
		tl, err := Parse(tt.tl)
		if err != nil {
			t.Fatal(err)
		}
		if got := tl.NeedsLinks(true); got != tt.shaped {
			t.Errorf("%q: NeedsLinks(shaped) = %v, want %v", tt.tl, got, tt.shaped)
		}
		if got := tl.NeedsLinks(false); got != tt.unshapedWant {
			t.Errorf("%q: NeedsLinks(unshaped) = %v, want %v", tt.tl, got, tt.unshapedWant)
		}
	}
}
