package check

import (
	"p2pfault/event"
	"strings"
	"testing"
	"time"
)

// pull is a sample naming source src, sent at start, ending after lat.
func tpull(src int, start, lat time.Duration, status, cached int) event.Sample {
	return event.Sample{Source: src, Start: start, Latency: lat, Status: status, CachedTokens: cached}
}

func TestDetect(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 20 * time.Second, Recovers: true}
	b := DefaultBounds() // faulted_median 2 s
	tests := []struct {
		name    string
		samples []event.Sample
		want    time.Duration
		wantOK  bool
	}{
		{name: "none", wantOK: false},
		{name: "sent at the action, miss under the bound",
			samples: []event.Sample{tpull(0, 10*time.Second, 10*ms, 200, 0)}, want: 10 * ms, wantOK: true},
		{name: "sent just before the action: not after it",
			samples: []event.Sample{tpull(0, 10*time.Second-1, 10*ms, 200, 0)}},
		{name: "took exactly the bound",
			samples: []event.Sample{tpull(0, 11*time.Second, 2*time.Second, 200, 0)}, want: 3 * time.Second, wantOK: true},
		{name: "took just over the bound",
			samples: []event.Sample{tpull(0, 11*time.Second, 2*time.Second+1, 200, 0)}},
		{name: "not 200",
			samples: []event.Sample{tpull(0, 11*time.Second, 10*ms, 500, 0)}},
		{name: "names another source",
			samples: []event.Sample{tpull(1, 11*time.Second, 10*ms, 200, 0)}},
		{name: "cut short by an early end",
			samples: []event.Sample{{Source: 0, Start: 11 * time.Second, Latency: 10 * ms, Status: 200, Aborted: true}}},
		{name: "hung pulls first, then the first quick one",
			samples: []event.Sample{
				tpull(0, 10*time.Second+100*ms, 12*time.Second, 200, 0), // waited for the heartbeat
				tpull(0, 10*time.Second+600*ms, 11*time.Second+500*ms, 200, 0),
				tpull(0, 22*time.Second, 10*ms, 200, 0), // the decoder noticed
				tpull(0, 23*time.Second, 10*ms, 200, 0),
			}, want: 12*time.Second + 10*ms, wantOK: true},
		{name: "earliest to end wins, not earliest sent",
			samples: []event.Sample{
				tpull(0, 11*time.Second, 1900*ms, 200, 0), // ends 12.9
				tpull(0, 12*time.Second, 100*ms, 200, 0),  // ends 12.1
			}, want: 2*time.Second + 100*ms, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Detect(tt.samples, w, b)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("Detect = %s, %v; want %s, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRecover(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 20 * time.Second, Recovers: true}
	tests := []struct {
		name    string
		w       event.Window
		samples []event.Sample
		want    time.Duration
		wantOK  bool
	}{
		{name: "none", w: w},
		{name: "hit ending exactly at the window's end", w: w,
			samples: []event.Sample{tpull(0, 19*time.Second, time.Second, 200, 384)}, want: 0, wantOK: true},
		{name: "hit ending just before the window's end", w: w,
			samples: []event.Sample{tpull(0, 19*time.Second, time.Second-1, 200, 384)}},
		{name: "hit ending just after the window's end", w: w,
			samples: []event.Sample{tpull(0, 19*time.Second, time.Second+1, 200, 384)}, want: 1, wantOK: true},
		{name: "a miss is no recovery", w: w,
			samples: []event.Sample{tpull(0, 21*time.Second, 10*ms, 200, 0)}},
		{name: "another source's hit is no recovery", w: w,
			samples: []event.Sample{tpull(1, 21*time.Second, 10*ms, 200, 384)}},
		{name: "a pull hung through the window that hit on resume counts", w: w,
			samples: []event.Sample{
				tpull(0, 21*time.Second, 10*ms, 200, 384),
				tpull(0, 15*time.Second, 5*time.Second+50*ms, 200, 384), // ends at 20.05 s
			}, want: 50 * ms, wantOK: true},
		{name: "misses, then the first hit", w: w,
			samples: []event.Sample{
				tpull(0, 20*time.Second, 30*time.Second, 200, 0),
				tpull(0, 25*time.Second, 10*ms, 200, 0),
				tpull(0, 26*time.Second, 10*ms, 200, 384),
				tpull(0, 27*time.Second, 10*ms, 200, 384),
			}, want: 6*time.Second + 10*ms, wantOK: true},
		{name: "remove never recovers", w: event.Window{Source: 0, Start: 10 * time.Second, End: 60 * time.Second},
			samples: []event.Sample{tpull(0, 61*time.Second, 10*ms, 200, 384)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Recover(tt.samples, tt.w)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("Recover = %s, %v; want %s, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestFaultTimesNullWhereNone(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 20 * time.Second, Recovers: true}
	got := FaultTimes([]event.Sample{tpull(0, 12*time.Second, 250*ms, 200, 0)}, w, DefaultBounds())
	if got.DetectS == nil || *got.DetectS != 2.25 {
		t.Errorf("detect_s = %v, want 2.25", got.DetectS)
	}
	if got.RecoverS != nil {
		t.Errorf("recover_s = %v, want nil (no hit after the window)", *got.RecoverS)
	}
	if s := FormatSeconds(got.DetectS) + " " + FormatSeconds(got.RecoverS); s != "2.25s –" {
		t.Errorf("formatted %q, want %q", s, "2.25s –")
	}
}

func TestFaultTookEffect(t *testing.T) {
	ok := func(action string, after time.Duration) event.Verification {
		return event.Verification{Action: action, Source: 0, At: 10 * time.Second, Verified: true, After: after, Detail: "seen"}
	}
	tests := []struct {
		name   string
		vs     []event.Verification
		within time.Duration
		pass   bool
		empty  bool
		detail string
	}{
		{name: "no action", empty: true, detail: "empty"},
		{name: "stall and resume seen at once", vs: []event.Verification{ok("stall", 5*ms), ok("resume", 3*ms)}, pass: true,
			detail: "all 2 fault actions took effect within 2.0s"},
		{name: "seen exactly at the bound", vs: []event.Verification{ok("kill", 2*time.Second)}, pass: true},
		{name: "seen just after the bound", vs: []event.Verification{ok("kill", 2*time.Second+1)},
			detail: "kill source-0 at 10.0s seen only after 2.00s (bound 2.0s)"},
		{name: "a custom bound", vs: []event.Verification{ok("kill", 3*time.Second)}, within: 5 * time.Second, pass: true},
		{name: "never seen", vs: []event.Verification{ok("stall", time.Millisecond),
			{Action: "resume", Source: 1, At: 20 * time.Second, After: 2 * time.Second, Detail: "pid 42 still in state T"}},
			detail: "1 of 2 fault actions did not take effect: resume source-1 at 20.0s not seen within 2.0s: pid 42 still in state T"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := FaultTookEffect(tt.vs, tt.within)
			if r.Name != NameFaultTookEffect || r.Passed != tt.pass || r.Empty != tt.empty {
				t.Errorf("got %+v, want passed %v empty %v", r, tt.pass, tt.empty)
			}
			if tt.detail != "" && !strings.Contains(r.Detail, tt.detail) {
				t.Errorf("detail %q, want it to contain %q", r.Detail, tt.detail)
			}
		})
	}
}
