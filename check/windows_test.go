package check

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// stream is a run as its facts happen: pulls (each sent at Start, ended at
// End() unless still in flight at the end), fault windows and
// verifications, for feeding a Judge in time order.
type stream struct {
	samples  []event.Sample
	inflight []event.PullStart // sent, never ended
	windows  []event.Window    // End 0: open at the end
	verifs   []event.Verification
	runEnd   time.Duration
	now      time.Duration
}

// randomStream is a two-source run at a few trials per second with
// windows as given; pulls naming a faulted source are slow, some fail,
// some never end, some are cut short at the end.
func randomStream(r *rand.Rand, windows []event.Window, runEnd time.Duration) stream {
	st := stream{windows: windows, runEnd: runEnd, now: runEnd + time.Duration(r.IntN(3000))*time.Millisecond}
	trial := int64(0)
	// In half the streams some pulls of the last 20 s never end: they hold
	// back the judging of every pull after them until the verdict.
	hang := r.IntN(2) == 0
	faulted := func(src int, at time.Duration) bool {
		for _, w := range windows {
			if w.Source == src && at >= w.Start && (w.End == 0 || at < w.End) {
				return true
			}
		}
		return false
	}
	for src := range 2 {
		for at := time.Duration(r.IntN(300)) * time.Millisecond; at < runEnd; at += time.Duration(200+r.IntN(400)) * time.Millisecond {
			trial++
			s := event.Sample{Source: src, Trial: trial, Start: at, Status: 200, PromptTokens: 400, CachedTokens: 384,
				Latency: time.Duration(10+r.IntN(40)) * time.Millisecond}
			if faulted(src, at) {
				s.CachedTokens = 0
				s.Latency = time.Duration(r.IntN(20000)) * time.Millisecond
			}
			switch k := r.IntN(40); {
			case k == 0:
				s.Status, s.Err = 500, "boom"
			case k == 1:
				s.CachedTokens = 0
			case k == 2 && hang && at > runEnd-20*time.Second:
				st.inflight = append(st.inflight, event.PullStart{Source: src, Trial: trial, Start: at})
				continue
			}
			if s.End() > runEnd && r.IntN(2) == 0 {
				s.Aborted, s.Latency, s.Status, s.CachedTokens = true, runEnd-at, 0, 0
			}
			st.samples = append(st.samples, s)
		}
		// A pull or two sent as the probe stops, at or after the run's
		// end: never judged, whether it ends or not.
		trial++
		late := runEnd + time.Duration(r.IntN(50))*time.Millisecond
		st.samples = append(st.samples, event.Sample{Source: src, Trial: trial, Start: late, Status: 500, Err: "late",
			Latency: 50 * time.Millisecond})
		if r.IntN(2) == 0 {
			trial++
			st.inflight = append(st.inflight, event.PullStart{Source: src, Trial: trial, Start: late + 60*time.Millisecond})
		}
	}
	for _, w := range windows {
		st.verifs = append(st.verifs, event.Verification{Action: w.Kind, Source: w.Source, At: w.Start, Verified: r.IntN(5) > 0, Detail: "seen"})
	}
	return st
}

// feedLive feeds st to a judge the way the experiment does: in time
// order, Advance every 100 ms, and returns the final verdict and every
// window verdict settled on the way.
func feedLive(t *testing.T, st stream, b event.Bounds, scripted bool) (event.Verdict, bool, []event.WindowVerdict) {
	t.Helper()
	type fact struct {
		at time.Duration
		do func(j *Judge)
	}
	var facts []fact
	for _, s := range st.samples {
		facts = append(facts, fact{s.Start, func(j *Judge) { j.Started(event.PullStart{Source: s.Source, Trial: s.Trial, Start: s.Start}) }})
		facts = append(facts, fact{min(s.End(), st.runEnd+time.Second), func(j *Judge) { j.Ended(s) }})
	}
	for _, p := range st.inflight {
		facts = append(facts, fact{p.Start, func(j *Judge) { j.Started(p) }})
	}
	for _, w := range st.windows {
		open := w
		open.End = 0
		facts = append(facts, fact{w.Start, func(j *Judge) { j.Open(open) }})
		if w.End != 0 {
			facts = append(facts, fact{w.End, func(j *Judge) { j.Close(w) }})
		}
	}
	for _, v := range st.verifs {
		facts = append(facts, fact{v.At + 10*time.Millisecond, func(j *Judge) { j.Verified(v) }})
	}
	for at := time.Duration(0); at < st.now; at += 100 * time.Millisecond {
		facts = append(facts, fact{at, func(j *Judge) { j.Advance(at) }})
	}
	facts = append(facts, fact{st.runEnd, func(j *Judge) { j.Stop(st.runEnd) }})
	slices.SortStableFunc(facts, func(a, b fact) int { return cmp.Compare(a.at, b.at) })
	j := NewJudge(Setup{Bounds: b, Sources: 2, Scripted: scripted})
	var settled []event.WindowVerdict
	for _, f := range facts {
		f.do(j)
		settled = append(settled, j.Settled()...)
	}
	v, ok := j.Verdict(st.now, st.runEnd, true)
	return v, ok, settled
}

// evaluated is the verdict Evaluate, WithFaultChecks and Steady give st
// judged on window w (closed at the run's end when open).
func evaluated(st stream, w event.Window, b event.Bounds) event.Verdict {
	if w.End == 0 {
		w.End = st.runEnd
	}
	in := Input{Samples: st.samples, Pending: st.inflight, Now: st.now, Window: w, RunEnd: st.runEnd, Bounds: b}
	v := WithFaultChecks(Evaluate(in), in, st.verifs)
	v.Steady = Steady(in, st.windows, 2)
	return v
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJudgeOfOneWindowIsEvaluate: a run of one fault window, fed live
// (pulls in time order, some still in flight, some cut short) or all at
// once (JudgeRun, as `p2pfault report` does), gets exactly the verdict
// Evaluate, WithFaultChecks and Steady give it: the same checks, details,
// summary, times and steady state.
func TestJudgeOfOneWindowIsEvaluate(t *testing.T) {
	b := DefaultBounds()
	shapes := []event.Window{
		{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true, Kind: "stall"},
		{Source: 1, Start: 10 * time.Second, End: 17 * time.Second, Recovers: true, Kind: "kill"},
		{Source: 0, Start: 10 * time.Second, Recovers: false, Kind: "remove"},
		{Source: 0, Start: 30 * time.Second, Recovers: true, Kind: "stall"}, // still open at the end
	}
	for seed := range 40 {
		w := shapes[seed%len(shapes)]
		t.Run(fmt.Sprintf("%s-%d", w.Kind, seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 1))
			st := randomStream(r, []event.Window{w}, 70*time.Second)
			want := evaluated(st, w, b)
			live, ok, _ := feedLive(t, st, b, true)
			if !ok {
				t.Fatal("no window judged")
			}
			live.Windows, live.Kinds = nil, nil
			if got, exp := js(t, live), js(t, want); got != exp {
				t.Errorf("live judge:\n%s\nEvaluate:\n%s", got, exp)
			}
			// JudgeRun takes a window open at the end as open (End 0), as
			// the events leave it.
			all, _ := JudgeRun(RunFacts{Setup: Setup{Bounds: b, Sources: 2, Scripted: true}, Windows: []event.Window{w},
				Samples: st.samples, Pending: st.inflight, Verifications: st.verifs, Now: st.now, RunEnd: st.runEnd})
			all.Windows, all.Kinds = nil, nil
			if got, exp := js(t, all), js(t, want); got != exp {
				t.Errorf("JudgeRun:\n%s\nEvaluate:\n%s", got, exp)
			}
		})
	}
}

// nemesisWindows are n windows one after another on alternating
// sources, each 20 s with a 30 s gap, a kill among them now and then.
func nemesisWindows(n int) []event.Window {
	var ws []event.Window
	at := 10 * time.Second
	for i := range n {
		w := event.Window{Source: i % 2, Start: at, End: at + 20*time.Second, Recovers: true, Kind: "stall"}
		if i%3 == 2 {
			w.Kind, w.End = "kill", at+7*time.Second
		}
		ws = append(ws, w)
		at = w.End + 30*time.Second
	}
	return ws
}

// TestJudgeJudgesEachWindowAsIfAlone: in a run of many windows (a nemesis),
// each window's verdict is what Evaluate gives the run judged on that
// window alone, with its pulls cut to its span (the window and its
// recovery, up to the next window); the run holds when every window did;
// windows settle as the run goes, each once, and the final verdict lists
// them all.
func TestJudgeJudgesEachWindowAsIfAlone(t *testing.T) {
	b := DefaultBounds()
	for seed := range 10 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 2))
			ws := nemesisWindows(8)
			runEnd := ws[len(ws)-1].End + 30*time.Second
			st := randomStream(r, ws, runEnd)
			v, ok, settled := feedLive(t, st, b, true)
			if !ok || len(v.Windows) != len(ws) {
				t.Fatalf("final verdict has %d windows, want %d", len(v.Windows), len(ws))
			}
			if len(settled) != len(ws)-1 {
				t.Errorf("%d windows settled during the run, want all but the last (%d)", len(settled), len(ws)-1)
			}
			passed := true
			for i, w := range ws {
				got := v.Windows[i]
				if got.Index != i+1 || got.Kind != w.Kind || got.Source != w.Source || got.Start != w.Start || got.End != w.End {
					t.Fatalf("window %d: %+v, want %+v", i, got, w)
				}
				if i < len(settled) && js(t, settled[i]) != js(t, got) {
					t.Errorf("window %d settled as\n%s\nbut the final verdict has\n%s", i+1, js(t, settled[i]), js(t, got))
				}
				// The run judged on this window alone, its span's pulls only.
				spanEnd := runEnd
				if i+1 < len(ws) {
					spanEnd = ws[i+1].Start
				}
				alone := st
				alone.samples = only(st.samples, func(s event.Sample) bool { return s.Start >= w.Start && s.Start < spanEnd })
				alone.inflight = nil
				for _, p := range st.inflight {
					if p.Start >= w.Start && p.Start < spanEnd {
						alone.inflight = append(alone.inflight, p)
					}
				}
				alone.runEnd = spanEnd
				alone.verifs = []event.Verification{st.verifs[i]}
				want := evaluated(alone, w, b)
				// all_200 of a window is its own span's (TestJudgeAll200OfAWindow).
				notAll := func(cs []event.Result) []event.Result {
					return slices.DeleteFunc(slices.Clone(cs), func(c event.Result) bool { return c.Name == NameAll200 })
				}
				if js(t, notAll(got.Checks)) != js(t, notAll(want.Checks)) {
					t.Errorf("window %d checks:\n%s\nalone:\n%s", i+1, js(t, got.Checks), js(t, want.Checks))
				}
				if js(t, got.Summary) != js(t, want.Summary) || js(t, got.Times) != js(t, *want.Times) {
					t.Errorf("window %d summary %s times %s, alone %s %s", i+1, js(t, got.Summary), js(t, got.Times), js(t, want.Summary), js(t, *want.Times))
				}
				passed = passed && got.Passed
			}
			var all200 bool
			for _, c := range v.Checks {
				if c.Name == NameAll200 {
					all200 = c.Passed
				}
			}
			effect := FaultTookEffect(st.verifs, 0).Passed
			if v.Passed != (passed && all200 && effect) {
				t.Errorf("run passed %v; windows passed %v, all_200 %v, effect %v", v.Passed, passed, all200, effect)
			}
			kinds := Kinds(v.Windows)
			if len(kinds) != 2 || kinds[0].Count+kinds[1].Count != len(ws) {
				t.Errorf("kinds %+v", kinds)
			}
			checkRunOfWindows(t, v)
		})
	}
}

// checkRunOfWindows: a run of several windows sums its windows' faulted,
// healthy and recovery pulls up (each pull is judged in one window at
// most), and its times are its windows' worst, none when one window has
// none (of those that recover, for recover_s).
func checkRunOfWindows(t *testing.T, v event.Verdict) {
	t.Helper()
	var want event.Summary
	sum := func(dst *event.Stats, w event.Stats) {
		dst.N, dst.Pulled, dst.Max = dst.N+w.N, dst.Pulled+w.Pulled, max(dst.Max, w.Max)
	}
	var detect, recover *float64
	undetected, unrecovered := false, false
	for _, w := range v.Windows {
		sum(&want.Faulted, w.Summary.Faulted)
		sum(&want.Healthy, w.Summary.Healthy)
		sum(&want.Recovery, w.Summary.Recovery)
		if d := w.Times.DetectS; d == nil {
			undetected = true
		} else if detect == nil || *d > *detect {
			detect = d
		}
		if !w.Recovers {
			continue
		}
		if r := w.Times.RecoverS; r == nil {
			unrecovered = true
		} else if recover == nil || *r > *recover {
			recover = r
		}
	}
	got := v.Summary
	for _, g := range []struct {
		name      string
		got, want event.Stats
	}{{"faulted", got.Faulted, want.Faulted}, {"healthy", got.Healthy, want.Healthy}, {"recovery", got.Recovery, want.Recovery}} {
		if g.got.N != g.want.N || g.got.Pulled != g.want.Pulled || g.got.Max != g.want.Max {
			t.Errorf("run's %s pulls %+v, its windows' %+v", g.name, g.got, g.want)
		}
	}
	if undetected {
		detect = nil
	}
	if unrecovered {
		recover = nil
	}
	if v.Times == nil || js(t, v.Times.DetectS) != js(t, detect) || js(t, v.Times.RecoverS) != js(t, recover) {
		t.Errorf("run's times %s, want detect %s recover %s", js(t, v.Times), js(t, detect), js(t, recover))
	}
}

// TestJudgeAll200OfAWindow: a window's all_200 judges the pulls judged in
// it (started in it, and in its recovery window naming its source or not);
// a failure after its recovery window is the run's, not the window's.
func TestJudgeAll200OfAWindow(t *testing.T) {
	b := DefaultBounds()
	ws := []event.Window{
		{Source: 0, Start: 10 * time.Second, End: 20 * time.Second, Recovers: true, Kind: "stall"},
		{Source: 1, Start: 80 * time.Second, End: 90 * time.Second, Recovers: true, Kind: "stall"},
	}
	var samples []event.Sample
	trial := int64(0)
	add := func(src int, at time.Duration, status int) {
		trial++
		samples = append(samples, event.Sample{Source: src, Trial: trial, Start: at, Latency: 20 * time.Millisecond, Status: status, CachedTokens: 1})
	}
	for at := time.Duration(0); at < 120*time.Second; at += time.Second {
		add(0, at, 200)
		add(1, at, 200)
	}
	add(1, 30*time.Second, 500) // in window 1's recovery, naming the other source
	add(0, 60*time.Second, 503) // after window 1's recovery window: the run's
	v, ok := JudgeRun(RunFacts{Setup: Setup{Bounds: b, Sources: 2, Scripted: true}, Windows: ws, Samples: samples,
		Now: 120 * time.Second, RunEnd: 120 * time.Second})
	if !ok {
		t.Fatal("no windows")
	}
	get := func(cs []event.Result, name string) event.Result {
		for _, c := range cs {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no check %s in %+v", name, cs)
		return event.Result{}
	}
	w1, w2 := get(v.Windows[0].Checks, NameAll200), get(v.Windows[1].Checks, NameAll200)
	if w1.Passed || !strings.Contains(w1.Detail, "1 of ") || !strings.Contains(w1.Detail, "source 1 at 30.0s: status 500") {
		t.Errorf("window 1 all_200: %+v, want the 500 in its recovery window", w1)
	}
	if !w2.Passed {
		t.Errorf("window 2 all_200: %+v, want passed", w2)
	}
	run := get(v.Checks, NameAll200)
	if run.Passed || !strings.Contains(run.Detail, "2 of 242 decoder requests did not return 200") {
		t.Errorf("the run's all_200: %+v, want both failures", run)
	}
	// The run's verdict judges every check in every window.
	if fm := get(v.Checks, NameFaultedBound); !fm.Passed || fm.Detail != "held in all 2 windows" {
		t.Errorf("faulted_max of the run: %+v", fm)
	}
}

// TestJudgeOverlappingWindowsJudgeEachPullOnce: with two faults in force
// at once (--nemesis-at-once 2), a pull naming a faulted source is its
// own window's faulted pull, never the other window's healthy one; a pull
// naming the third source during both is judged in the first.
func TestJudgeOverlappingWindowsJudgeEachPullOnce(t *testing.T) {
	b := DefaultBounds()
	ws := []event.Window{
		{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true, Kind: "stall"},
		{Source: 1, Start: 20 * time.Second, End: 50 * time.Second, Recovers: true, Kind: "stall"},
	}
	var samples []event.Sample
	trial := int64(0)
	for at := time.Duration(0); at < 100*time.Second; at += 500 * time.Millisecond {
		for src := range 3 {
			trial++
			s := event.Sample{Source: src, Trial: trial, Start: at, Latency: 20 * time.Millisecond, Status: 200, CachedTokens: 1}
			for _, w := range ws {
				if w.Source == src && at >= w.Start && at < w.End {
					s.Latency, s.CachedTokens = 30*time.Second, 0 // main's stall
				}
			}
			samples = append(samples, s)
		}
	}
	v, _ := JudgeRun(RunFacts{Setup: Setup{Bounds: b, Sources: 3, Scripted: true}, Windows: ws, Samples: samples,
		Now: 100 * time.Second, RunEnd: 100 * time.Second})
	w1, w2 := v.Windows[0].Summary, v.Windows[1].Summary
	if w1.Faulted.N != 60 || w2.Faulted.N != 60 {
		t.Errorf("faulted pulls %d and %d, want 60 each (30 s at 2/s)", w1.Faulted.N, w2.Faulted.N)
	}
	// Window 1's healthy pulls: source-1 before its own stall (10-20 s) and
	// source-2 (10-40 s); window 2's: source-2 from 40 s, the first's end.
	if w1.Healthy.N != 20+60 || w1.Healthy.Pulled != 80 {
		t.Errorf("window 1 healthy %+v, want 80 pulls, all hits", w1.Healthy)
	}
	if w2.Healthy.N != 20 || w2.Healthy.Pulled != 20 {
		t.Errorf("window 2 healthy %+v, want source-2's 20 pulls from 40 s", w2.Healthy)
	}
	for _, w := range v.Windows {
		for _, c := range w.Checks {
			if c.Name == NameHealthy && !c.Passed {
				t.Errorf("window %d healthy_keeps_hitting failed: %s", w.Index, c.Detail)
			}
		}
	}
}

// BenchmarkJudgeRetainsNothingPerTrial feeds a judge a soak's pulls (two
// sources, a fault window every minute, as a nemesis run's) the way the
// experiment does, and reports the heap it keeps per pull after a warm-up:
// the judge's memory must not grow with the run (target ~0 B/trial; the
// experiment used to keep every sample, ~350 B each).
func BenchmarkJudgeRetainsNothingPerTrial(b *testing.B) {
	bounds := DefaultBounds()
	j := NewJudge(Setup{Bounds: bounds, Sources: 2, Scripted: true})
	var trial int64
	at := time.Duration(0)
	step := func(n int) {
		for range n {
			for src := range 2 {
				trial++
				p := event.PullStart{Source: src, Trial: trial, Start: at}
				j.Started(p)
				j.Ended(event.Sample{Source: src, Trial: trial, Start: at, Latency: 20 * time.Millisecond, Status: 200, CachedTokens: 1})
			}
			at += 10 * time.Millisecond
			if sec := at % time.Minute; sec == 10*time.Second {
				j.Open(event.Window{Source: int(at/time.Minute) % 2, Start: at, Recovers: true, Kind: "stall"})
			} else if sec == 30*time.Second {
				j.Close(event.Window{Source: int(at/time.Minute) % 2, Start: at - 20*time.Second, End: at, Recovers: true, Kind: "stall"})
			}
			if at%(100*time.Millisecond) == 0 {
				j.Advance(at)
				j.Settled()
			}
			if at%time.Second == 0 {
				_, _ = j.Verdict(at, at, false)
			}
		}
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	step(60_000) // ten minutes at 100 trials/s: warm-up, windows settled
	before := heap()
	b.ResetTimer()
	step(b.N)
	b.StopTimer()
	after := heap()
	// A settled window keeps its verdict: O(1) per window, counted here too.
	b.ReportMetric(float64(int64(after)-int64(before))/float64(2*b.N), "B/trial")
}

// TestJudgeGivesAVerificationToItsWindow: a fault action's verification
// belongs to the window it opened even when the window opened seconds
// after the action began (a partition's rules applied slowly on a loaded
// host: the verification's At is before the window's start), and an
// undo's to the window it closed; not to the source's previous window.
func TestJudgeGivesAVerificationToItsWindow(t *testing.T) {
	b := DefaultBounds()
	j := NewJudge(Setup{Bounds: b, Sources: 2})
	s := func(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }
	w1 := event.Window{Source: 1, Start: s(50.2), Recovers: true, Kind: "partition"}
	j.Open(w1)
	j.Verified(event.Verification{Action: "partition", Source: 1, At: s(50.0), Verified: true, Detail: "hangs"})
	w1.End = s(55.4)
	j.Close(w1)
	j.Verified(event.Verification{Action: "heal", Source: 1, At: s(55.3), Verified: true, Detail: "answers"})
	w2 := event.Window{Source: 1, Start: s(120.8), Recovers: true, Kind: "partition"}
	j.Open(w2)
	j.Verified(event.Verification{Action: "partition", Source: 1, At: s(119.6), Verified: false, Detail: "a connect still answers"})
	w2.End = s(131.4)
	j.Close(w2)
	j.Verified(event.Verification{Action: "heal", Source: 1, At: s(131.4), Verified: true, Detail: "answers"})
	v, ok := j.Verdict(s(170), s(170), true)
	if !ok || len(v.Windows) != 2 {
		t.Fatalf("verdict %+v", v)
	}
	for i, want := range []struct {
		passed bool
		detail string
	}{
		{true, "all 2 fault actions took effect"},
		{false, "1 of 2 fault actions did not take effect: partition source-1 at 119.6s"},
	} {
		var got *event.Result
		for k, c := range v.Windows[i].Checks {
			if c.Name == NameFaultTookEffect {
				got = &v.Windows[i].Checks[k]
			}
		}
		if got == nil || got.Passed != want.passed || !strings.HasPrefix(got.Detail, want.detail) {
			t.Errorf("window %d: %s = %+v, want passed %v, %q", i+1, NameFaultTookEffect, got, want.passed, want.detail)
		}
	}
}
