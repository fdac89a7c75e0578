package check

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// tpull is a sample naming source src, sent at start, ending after lat.
func tpull(src int, start, lat time.Duration, status, cached int) event.Sample {
	return event.Sample{Source: src, Start: start, Latency: lat, Status: status, CachedTokens: cached}
}

// every gives one pull naming src every step in [from, to), its latency
// and cached tokens from f.
func every(src int, from, to, step time.Duration, f func(start time.Duration) (time.Duration, int)) []event.Sample {
	var out []event.Sample
	for t := from; t < to; t += step {
		lat, cached := f(t)
		out = append(out, tpull(src, t, lat, 200, cached))
	}
	return out
}

func timesIn(samples []event.Sample, pending []event.PullStart, w event.Window, runEnd, now time.Duration) Input {
	return Input{Samples: samples, Pending: pending, Now: now, Window: w, RunEnd: runEnd, Bounds: DefaultBounds()}
}

func TestDetect(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 20 * time.Second, Recovers: true}
	tests := []struct {
		name    string
		samples []event.Sample
		pending []event.PullStart
		want    time.Duration
		wantOK  bool
	}{
		{name: "none", wantOK: false},
		{name: "sent at the action, miss under the bound: detected at once",
			samples: []event.Sample{tpull(0, 10*time.Second, 10*ms, 200, 0)}, want: 0, wantOK: true},
		{name: "sent just before the action: not in the window",
			samples: []event.Sample{tpull(0, 10*time.Second-1, 10*ms, 200, 0)}},
		{name: "took exactly the bound is good",
			samples: []event.Sample{tpull(0, 11*time.Second, 2*time.Second, 200, 0)}, want: time.Second, wantOK: true},
		{name: "took just over the bound is bad",
			samples: []event.Sample{tpull(0, 11*time.Second, 2*time.Second+1, 200, 0)}},
		{name: "not 200 is bad",
			samples: []event.Sample{tpull(0, 11*time.Second, 10*ms, 200, 0), tpull(0, 12*time.Second, 10*ms, 500, 0)}},
		{name: "names another source",
			samples: []event.Sample{tpull(1, 11*time.Second, 10*ms, 200, 0)}},
		{name: "the start of the first good pull after the last bad one, not its end",
			samples: []event.Sample{
				tpull(0, 10*time.Second+100*ms, 12*time.Second, 200, 0), // waited for the heartbeat
				tpull(0, 10*time.Second+600*ms, 11*time.Second+500*ms, 200, 0),
				tpull(0, 12*time.Second, 10*ms, 200, 0), // the decoder stopped waiting
				tpull(0, 13*time.Second, 10*ms, 200, 0),
			}, want: 2 * time.Second, wantOK: true},
		{name: "a bad pull sent with a good one at the same instant wins",
			samples: []event.Sample{
				tpull(0, 12*time.Second, 10*ms, 200, 0),
				tpull(0, 12*time.Second, 5*time.Second, 200, 0),
				tpull(0, 13*time.Second, 10*ms, 200, 0),
			}, want: 3 * time.Second, wantOK: true},
		{name: "a slow pull just before the window closes undoes it",
			samples: []event.Sample{
				tpull(0, 11*time.Second, 10*ms, 200, 0),
				tpull(0, 19*time.Second, 3*time.Second, 200, 0),
			}},
		{name: "a slow pull sent when the window closes is not in it",
			samples: []event.Sample{
				tpull(0, 11*time.Second, 10*ms, 200, 0),
				tpull(0, 20*time.Second, 3*time.Second, 200, 0),
			}, want: time.Second, wantOK: true},
		{name: "a pull in flight past the bound is bad",
			samples: []event.Sample{tpull(0, 11*time.Second, 10*ms, 200, 0)},
			pending: []event.PullStart{{Source: 0, Trial: 9, Start: 15 * time.Second}}},
		{name: "a pull in flight younger than the bound breaks nothing and detects nothing",
			samples: []event.Sample{tpull(0, 11*time.Second, 10*ms, 200, 0)},
			pending: []event.PullStart{{Source: 0, Trial: 9, Start: 17500 * ms}, {Source: 0, Trial: 10, Start: 10 * time.Second}},
			// The one sent at 10 s has waited 8 s at now (18 s): bad.
			want: time.Second, wantOK: true},
		{name: "a pull cut short by the run's end after waiting past the bound is bad",
			samples: []event.Sample{
				tpull(0, 11*time.Second, 10*ms, 200, 0),
				{Source: 0, Start: 12 * time.Second, Latency: 3 * time.Second, Aborted: true},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Detect(timesIn(tt.samples, tt.pending, w, 30*time.Second, 18*time.Second))
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("Detect = %s, %v; want %s, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// The arms' stalls as the simulated engine and vLLM give them, one pull
// naming source-0 every 0.5 s, the stall 10–40 s: main's is not detected
// (from the lookup timeout on, each new pull waits on a reconnect's
// handshake until the window closes), fixed's is detected about 2 s before
// the lookup timeout reaps the session (the pulls sent then return within
// the 2 s bound when it does, and every later one prefills at once).
func TestDetectOnBothArmsStalls(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true}
	const reap = 17980 * ms // the lookup timeout, ~8 s after the source's last frame
	hangUntil := func(end time.Duration) func(time.Duration) (time.Duration, int) {
		return func(start time.Duration) (time.Duration, int) { return end - start, 0 }
	}
	before := every(0, 0, 10*time.Second, 500*ms, func(time.Duration) (time.Duration, int) { return 30 * ms, 384 })

	main := append(append(append([]event.Sample(nil), before...),
		every(0, 10*time.Second, reap, 500*ms, hangUntil(reap))...),
		// The reconnect started at the reap dies on its 30 s handshake
		// deadline; every pull sent meanwhile waits on it.
		every(0, 18*time.Second, 48*time.Second, 500*ms, hangUntil(reap+30*time.Second))...)
	if _, ok := Detect(timesIn(main, nil, w, 73*time.Second, 73*time.Second)); ok {
		t.Error("main's stall is detected; want not detected (its pulls wait on the handshake until the window closes)")
	}
	if tm := FaultTimes(timesIn(main, nil, w, 73*time.Second, 73*time.Second)); tm.DetectS != nil {
		t.Errorf("main's detect_s = %v, want null", *tm.DetectS)
	}

	fixed := append(append(append([]event.Sample(nil), before...),
		every(0, 10*time.Second, reap, 500*ms, hangUntil(reap))...),
		every(0, 18*time.Second, 48*time.Second, 500*ms, func(time.Duration) (time.Duration, int) { return 20 * ms, 0 })...)
	d, ok := Detect(timesIn(fixed, nil, w, 73*time.Second, 73*time.Second))
	// The first pull sent from reap - 2 s on: 16.0 s, 6.0 s after the fault.
	if !ok || d != 6*time.Second {
		t.Errorf("fixed's detect = %s, %v; want 6s (the first pull sent within the bound of the reap at %s)", d, ok, reap)
	}

	// Live, 1 s after the reap, main's pulls sent since are younger than
	// the bound: not yet bad, so the pulls that returned at the reap read
	// as detected; 2 s later they have waited past the bound and it is
	// gone again.
	now := reap + time.Second
	var ended []event.Sample
	var pending []event.PullStart
	for i, s := range main {
		switch {
		case s.End() <= now:
			ended = append(ended, s)
		case s.Start < now:
			pending = append(pending, event.PullStart{Source: 0, Trial: int64(i), Start: s.Start})
		}
	}
	live := func(now time.Duration) Input {
		wl := w
		wl.End = now // the window is still open: it runs to now
		return timesIn(ended, pending, wl, now, now)
	}
	if d, ok := Detect(live(now)); !ok || d != 6*time.Second {
		t.Errorf("main live at %s: detect = %s, %v; want 6s so far", now, d, ok)
	}
	if _, ok := Detect(live(now + 2*time.Second)); ok {
		t.Errorf("main live at %s: detected; want not, the pulls sent since the reap have waited past the bound", now+2*time.Second)
	}
}

// A flapping fault: fast, slow, fast. Detection is the first fast pull
// after the slow stretch; a detection in the first fast stretch does not
// survive the slow one.
func TestDetectFlapping(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true}
	var s []event.Sample
	s = append(s, every(0, 10*time.Second, 20*time.Second, 500*ms, func(time.Duration) (time.Duration, int) { return 20 * ms, 0 })...)
	s = append(s, every(0, 20*time.Second, 25*time.Second, 500*ms, func(time.Duration) (time.Duration, int) { return 6 * time.Second, 0 })...)
	s = append(s, every(0, 25*time.Second, 40*time.Second, 500*ms, func(time.Duration) (time.Duration, int) { return 20 * ms, 0 })...)
	d, ok := Detect(timesIn(s, nil, w, 60*time.Second, 60*time.Second))
	if !ok || d != 15*time.Second {
		t.Errorf("detect = %s, %v; want 15s (the first fast pull after the slow stretch, at 25 s)", d, ok)
	}
	// The same stream cut in the slow stretch: the early fast pulls do not
	// count as a detection.
	cut := only(s, func(x event.Sample) bool { return x.Start < 24*time.Second })
	w.End = 24 * time.Second
	if d, ok := Detect(timesIn(cut, nil, w, 24*time.Second, 24*time.Second)); ok {
		t.Errorf("window closing in the slow stretch: detect = %s; want not detected", d)
	}
}

func TestRecover(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 20 * time.Second, Recovers: true}
	b := DefaultBounds() // recovery share 50 %
	hits := func(pattern string, from time.Duration) []event.Sample {
		var out []event.Sample
		for i, c := range pattern {
			cached := 0
			if c == 'h' {
				cached = 384
			}
			out = append(out, tpull(0, from+time.Duration(i)*time.Second, 10*ms, 200, cached))
		}
		return out
	}
	tests := []struct {
		name    string
		w       event.Window
		rate    float64
		samples []event.Sample
		pending []event.PullStart
		want    time.Duration
		wantOK  bool
	}{
		{name: "none", w: w},
		{name: "the first pull after the window hits and so do the rest", w: w, samples: hits("hhhh", 20*time.Second), want: 0, wantOK: true},
		{name: "a pull sent before the window's end does not count, even if it hit after it", w: w,
			samples: []event.Sample{tpull(0, 19*time.Second, 5*time.Second, 200, 384), tpull(0, 21*time.Second, 10*ms, 200, 0)}},
		{name: "misses, then hits: the first hit", w: w, samples: hits("mmmmhhhh", 20*time.Second), want: 4 * time.Second, wantOK: true},
		{name: "a lone early hit among misses is not the recovery", w: w, samples: hits("mhmmmmmmmmhhh", 20*time.Second),
			want: 10 * time.Second, wantOK: true},
		{name: "an early hit the rest keep at the share is", w: w, samples: hits("mhmhmhmhmh", 20*time.Second),
			want: time.Second, wantOK: true},
		{name: "exactly the share from the first hit", w: w, rate: 0.5, samples: hits("mmhm", 20*time.Second),
			want: 2 * time.Second, wantOK: true},
		{name: "under the share from every hit", w: w, rate: 0.75, samples: hits("mmhmhmm", 20*time.Second)},
		{name: "misses only", w: w, samples: hits("mmmm", 20*time.Second)},
		{name: "another source's hits are no recovery", w: w,
			samples: []event.Sample{tpull(1, 21*time.Second, 10*ms, 200, 384)}},
		{name: "pulls in flight are left out", w: w, samples: hits("mmh", 20*time.Second),
			pending: []event.PullStart{{Source: 0, Trial: 99, Start: 23 * time.Second}, {Source: 0, Trial: 100, Start: 24 * time.Second}},
			want:    2 * time.Second, wantOK: true},
		{name: "pulls sent at or after the run's end are left out", w: w,
			samples: append(hits("mh", 20*time.Second), hits("mmmm", 50*time.Second)...), want: time.Second, wantOK: true},
		{name: "remove never recovers", w: event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second},
			samples: hits("hhh", 41*time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := timesIn(tt.samples, tt.pending, tt.w, 50*time.Second, 50*time.Second)
			if tt.rate > 0 {
				in.Bounds.RecoveryHitRate = tt.rate
			} else {
				in.Bounds.RecoveryHitRate = b.RecoveryHitRate
			}
			got, ok := Recover(in)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("Recover = %s, %v; want %s, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// The accumulators give what the definitions say, read naively (every
// candidate pull against every pull after it), on random streams.
func TestTimesMatchTheirDefinitions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 30 * time.Second, Recovers: true}
	for k := range 500 {
		var s []event.Sample
		for i := range 60 {
			start := time.Duration(i) * 500 * ms
			lat := []time.Duration{10 * ms, 1500 * ms, 2 * time.Second, 2100 * ms, 9 * time.Second}[rng.IntN(5)]
			status := 200
			if rng.IntN(10) == 0 {
				status = 500
			}
			cached := 0
			if rng.IntN(3) > 0 {
				cached = 384
			}
			s = append(s, event.Sample{Source: rng.IntN(2) * rng.IntN(2), Trial: int64(i), Start: start, Latency: lat, Status: status, CachedTokens: cached})
		}
		rate := []float64{0.5, 0.75, 0.9}[k%3]
		in := timesIn(s, nil, w, 30*time.Second, 30*time.Second)
		in.Bounds.RecoveryHitRate = rate

		gotD, okD := Detect(in)
		wantD, wantOKD := naiveDetect(s, w, in.Bounds)
		if okD != wantOKD || gotD != wantD {
			t.Fatalf("stream %d: Detect = %s, %v; the definition gives %s, %v", k, gotD, okD, wantD, wantOKD)
		}
		in.RunEnd = 30 * time.Second
		w2 := w
		w2.End = 15 * time.Second
		in.Window = w2
		gotR, okR := Recover(in)
		wantR, wantOKR := naiveRecover(s, w2, in.RunEnd, rate)
		if okR != wantOKR || gotR != wantR {
			t.Fatalf("stream %d (share %.2f): Recover = %s, %v; the definition gives %s, %v", k, rate, gotR, okR, wantR, wantOKR)
		}
	}
}

func naiveDetect(s []event.Sample, w event.Window, b event.Bounds) (time.Duration, bool) {
	var mine []event.Sample
	for _, x := range s {
		if x.Source == w.Source && x.Start >= w.Start && x.Start < w.End {
			mine = append(mine, x)
		}
	}
	good := func(x event.Sample) bool { return x.Status == 200 && x.Latency <= b.FaultedMedian }
	for _, c := range mine {
		if !good(c) {
			continue
		}
		ok := true
		for _, x := range mine {
			if x.Start >= c.Start && !good(x) {
				ok = false
			}
		}
		if ok {
			return c.Start - w.Start, true
		}
	}
	return 0, false
}

func naiveRecover(s []event.Sample, w event.Window, runEnd time.Duration, rate float64) (time.Duration, bool) {
	var mine []event.Sample
	for _, x := range s {
		if x.Source == w.Source && x.Start >= w.End && x.Start < runEnd {
			mine = append(mine, x)
		}
	}
	for i, c := range mine {
		if !c.Hit() {
			continue
		}
		h, n := 0, 0
		for _, x := range mine[i:] {
			n++
			if x.Hit() {
				h++
			}
		}
		if atLeast(h, n, rate) {
			return c.Start - w.End, true
		}
	}
	return 0, false
}

func TestFaultTimesNullWhereNone(t *testing.T) {
	w := event.Window{Source: 0, Start: 10 * time.Second, End: 20 * time.Second, Recovers: true}
	got := FaultTimes(timesIn([]event.Sample{tpull(0, 12*time.Second, 250*ms, 200, 0)}, nil, w, 30*time.Second, 30*time.Second))
	if got.DetectS == nil || *got.DetectS != 2 {
		t.Errorf("detect_s = %v, want 2", got.DetectS)
	}
	if got.RecoverS != nil {
		t.Errorf("recover_s = %v, want nil (no hit after the window)", *got.RecoverS)
	}
	if s := FormatSeconds(got.DetectS) + " " + FormatSeconds(got.RecoverS); s != "2.00s –" {
		t.Errorf("formatted %q, want %q", s, "2.00s –")
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
