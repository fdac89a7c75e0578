package fault_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/memnet"
	"p2pfault/netenv"
	"p2pfault/scrape"
)

// busySource is a fake engine on an in-memory network: every completion
// takes service on the bubble's clock (or ends when its client goes
// away), its /metrics counts the requests in it, and it records when each
// request arrived.
type busySource struct {
	service time.Duration
	url     string
	flat    bool // its /metrics always say nothing runs (an engine the load does not reach)

	mu       sync.Mutex
	arrived  []time.Time
	inside   int
	cutShort int // requests whose client went away before the answer
}

func startBusySource(t *testing.T, fab *memnet.Fabric, service time.Duration, flat bool) *busySource {
	s := &busySource{service: service, flat: flat}
	ln, err := fab.Host("source-0").Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.url = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"m","max_model_len":512}]}`)
	})
	mux.HandleFunc("POST /v1/completions", s.complete)
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := s.inside
		if s.flat {
			n = 0
		}
		s.mu.Unlock()
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} %d\n"+
			"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 0\n", n)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *busySource) complete(w http.ResponseWriter, r *http.Request) {
	// Read as an engine does: net/http watches for the client going away
	// only once the body was read.
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.arrived = append(s.arrived, time.Now())
	s.inside++
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.inside--; s.mu.Unlock() }()
	t := time.NewTimer(s.service)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		s.mu.Lock()
		s.cutShort++
		s.mu.Unlock()
	case <-t.C:
		fmt.Fprint(w, `{"choices":[{"text":"x"}]}`)
	}
}

func (s *busySource) lastArrival() (time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.arrived) == 0 {
		return time.Time{}, 0
	}
	return s.arrived[len(s.arrived)-1], len(s.arrived)
}

// loadTarget is the fault.Target busy acts on: only its HTTP address is
// used.
type loadTarget struct{ url string }

func (loadTarget) Name() string      { return "source-0" }
func (t loadTarget) HTTPURL() string { return t.url }
func (loadTarget) Stop(context.Context) (time.Time, error) {
	return time.Time{}, errors.New("not here")
}
func (loadTarget) Continue(context.Context) error { return errors.New("not here") }
func (loadTarget) Kill(context.Context, func(time.Time, error)) (time.Time, error) {
	return time.Time{}, errors.New("not here")
}
func (loadTarget) Terminate(context.Context, func(time.Time, error)) error {
	return errors.New("not here")
}
func (loadTarget) Restore(context.Context) (time.Time, error) {
	return time.Time{}, errors.New("not here")
}

// loadEnv is a recEnv that can send load (fault.LoadEnv) through an
// in-memory client host.
type loadEnv struct {
	*recEnv
	nw   netenv.Network
	url  string
	mu   sync.Mutex
	last event.LoadInfo
	n    int
}

func (e *loadEnv) LoadTarget() (string, netenv.Network) { return "m", e.nw }
func (e *loadEnv) SourceMetrics(ctx context.Context) (event.Reading, error) {
	return scrape.FetchOnce(ctx, e.nw, e.url, 0)
}
func (e *loadEnv) Loaded(info event.LoadInfo, start, end time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !end.IsZero() {
		info.End = end.Sub(start)
	}
	e.last, e.n = info, e.n+1
}

// TestBusyLoadStopsAtItsWindowsEnd fires busy for 3 s on a fake source
// whose completions take 400 ms: the window closes at 3 s on the clock,
// no request of the load reaches the source after it, the four in flight
// then are cancelled (the source sees their clients go), and the counts
// add up: 7 rounds of 4 answered, 4 cut off.
func TestBusyLoadStopsAtItsWindowsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		src := startBusySource(t, fab, 400*time.Millisecond, false)
		env := &loadEnv{recEnv: newRecEnv(t), nw: fab.Host("p2pfault"), url: src.url}
		k, _ := fault.Lookup(fault.ActionBusy)
		f := &fault.Fire{Kind: k, Target: loadTarget{src.url}, Options: fault.Options{For: 3 * time.Second, Arg: "4x100"}, By: "script", Env: env}
		start := time.Now()
		if err := k.Act(f); err != nil {
			t.Fatal(err)
		}
		if env.cond != fault.CondBusy {
			t.Errorf("condition %q, want %q", env.cond, fault.CondBusy)
		}
		// Every request of the load reaches the source before the reading:
		// at one instant of the bubble's clock, how many of the four have
		// arrived would be the scheduler's choice (CI saw "running 2").
		synctest.Wait()
		ef := k.Verify(f)
		if !ef.OK || !strings.Contains(ef.Detail, "running 4") {
			t.Errorf("verify: %+v, want the source's 4 running requests seen", ef)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()

		env.mu.Lock()
		last := env.last
		env.mu.Unlock()
		env.recEnv.mu.Lock()
		windows, winAt := strings.Join(env.windows, " "), env.winAt
		env.recEnv.mu.Unlock()
		if windows != "open close" || !winAt[1].Equal(start.Add(3*time.Second)) {
			t.Fatalf("windows %q at %v, want open then close at 3s after %v", windows, winAt, start)
		}
		at, n := src.lastArrival()
		if at.After(winAt[1]) {
			t.Errorf("a load request reached the source at %v, after the window closed at %v", at.Sub(start), winAt[1].Sub(start))
		}
		if !last.Final || last.Concurrency != 4 || last.PromptTokens != 100 {
			t.Fatalf("last load report %+v, want a final one of 4x100", last)
		}
		c := last.LoadCounts
		if c.Sent != n || c.Answered != 28 || c.Cancelled != 4 || c.Failed != 0 || c.InFlight != 0 {
			t.Errorf("counts %+v (source saw %d), want 32 sent, 28 answered, 4 cancelled", c, n)
		}
		if c.P50 != 400*time.Millisecond || c.Max != 400*time.Millisecond {
			t.Errorf("answered latency p50 %v max %v, want 400ms (the fake's service time)", c.P50, c.Max)
		}
		src.mu.Lock()
		cut := src.cutShort
		src.mu.Unlock()
		if cut != 4 {
			t.Errorf("the source saw %d requests cut short, want the 4 in flight at the end", cut)
		}
		if env.cond != event.CondUp || env.Held() != nil {
			t.Errorf("after the window: condition %q held %v, want up and nothing held", env.cond, env.Held())
		}
	})
}

// TestBusyRefusesAPromptTheSourceCannotTake: a prompt longer than the
// source's max_model_len allows fails the action, naming the limit, and
// opens no window.
func TestBusyRefusesAPromptTheSourceCannotTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		src := startBusySource(t, fab, time.Millisecond, false)
		env := &loadEnv{recEnv: newRecEnv(t), nw: fab.Host("p2pfault"), url: src.url}
		k, _ := fault.Lookup(fault.ActionBusy)
		f := &fault.Fire{Kind: k, Target: loadTarget{src.url}, Options: fault.Options{For: time.Second, Arg: "2x7000"}, Env: env}
		err := k.Act(f)
		if err == nil || !strings.Contains(err.Error(), "7000 tokens does not fit its max_model_len 512") {
			t.Fatalf("err %v, want the prompt that does not fit named", err)
		}
		if len(env.windows) != 0 || env.actions() != "busy:!" {
			t.Errorf("windows %v events %q, want none and the failed busy", env.windows, env.actions())
		}
		if _, n := src.lastArrival(); n != 0 {
			t.Errorf("%d load requests sent, want none", n)
		}
	})
}

// TestBusyNotSeenInTheSourcesQueuesFailsFaultTookEffect: a load the
// source's own /metrics do not show (its queues stay empty) is not taken
// for a busy source: the verification fails after its 2 s, saying what
// the queues were, and so does check fault_took_effect.
func TestBusyNotSeenInTheSourcesQueuesFailsFaultTookEffect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fab := memnet.New(1)
		src := startBusySource(t, fab, 400*time.Millisecond, true)
		env := &loadEnv{recEnv: newRecEnv(t), nw: fab.Host("p2pfault"), url: src.url}
		k, _ := fault.Lookup(fault.ActionBusy)
		f := &fault.Fire{Kind: k, Target: loadTarget{src.url}, Options: fault.Options{For: 5 * time.Second, Arg: "4x100"}, Env: env}
		if err := k.Act(f); err != nil {
			t.Fatal(err)
		}
		ef := k.Verify(f)
		if ef.OK || ef.After != 2*time.Second || !strings.Contains(ef.Detail, "running 0, waiting 0") {
			t.Fatalf("verify: %+v, want not seen within 2s, the flat queues named", ef)
		}
		r := check.FaultTookEffect([]event.Verification{{Action: fault.ActionBusy, At: time.Second, Verified: ef.OK, After: ef.After, Detail: ef.Detail}}, 0)
		if r.Passed || !strings.Contains(r.Detail, "busy source-0 at 1.0s not seen within 2.0s") || !strings.Contains(r.Detail, "needs a rise of 2") {
			t.Errorf("fault_took_effect: %+v, want it failed with the queues' evidence", r)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
	})
}

func TestQueuesRoseIsTheSourcesOwnEvidence(t *testing.T) {
	r := func(run, wait float64) event.Reading {
		return event.Reading{Running: event.MetricOf(run), Waiting: event.MetricOf(wait)}
	}
	for _, c := range []struct {
		name         string
		before, now  event.Reading
		why          string
		want         bool
		detailSubstr string
	}{
		{"queued behind the load", r(1, 0), r(8, 5), "", true, "running 8, waiting 5"},
		{"half of the load is enough", r(0, 0), r(8, 0), "", true, "needs a rise of 8"},
		{"a rise too small", r(1, 0), r(4, 2), "", false, "needs a rise of 8"},
		{"already busy before", r(16, 4), r(16, 6), "", false, "before running 16, waiting 4"},
		{"not read before: taken as empty", event.Reading{}, r(9, 0), "timed out", true, "not read: timed out"},
		{"no queue series", r(0, 0), event.Reading{}, "", false, "exports neither"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ok, detail := fault.QueuesRose("source-0", c.before, c.why, c.now, 16)
			if ok != c.want || !strings.Contains(detail, c.detailSubstr) {
				t.Errorf("QueuesRose = %v %q, want %v and %q", ok, detail, c.want, c.detailSubstr)
			}
		})
	}
}

func TestBusyParsesItsLoadAndNeedsADuration(t *testing.T) {
	for _, c := range []struct {
		text, want string // want: the step back, or the error's words
	}{
		{"at 1s busy source-0 for 30s", "at 1s busy source-0 for 30s"},
		{"at 1s busy 8 source-1 for 5s", "at 1s busy 8 source-1 for 5s"},
		{"at 1s busy 8x2000 source-0 for 5s", "at 1s busy 8x2000 source-0 for 5s"},
		{"at 1s busy source-0", `timeline:1:20: busy needs "for DURATION"`},
		{"at 1s busy 0 source-0 for 1s", `timeline:1:12: busy "0": want a load such as 16 or 16x2000`},
		{"at 1s busy 8x source-0 for 1s", `prompt tokens "" is not a whole number`},
		{"at 1s busy 8x-1 source-0 for 1s", `prompt tokens "-1" is not a whole number`},
		{"at 1s busy lots source-0 for 1s", `requests at once "lots"`},
		{"at 1s busy 8", `missing a target after "at 1s busy 8"`},
	} {
		tl, err := fault.Parse(c.text)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			got = tl.String()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("Parse(%q) = %s, want %s", c.text, got, c.want)
		}
	}
	for _, d := range []string{"busy", "busy=4x100"} {
		if _, err := fault.ParseDraw(d); err != nil {
			t.Errorf("ParseDraw(%q): %v, want a nemesis to draw it", d, err)
		}
	}
	if _, err := fault.ParseDraw("busy=4y"); err == nil {
		t.Error(`ParseDraw("busy=4y") took a bad load`)
	}
	l, err := fault.ParseBusy("")
	if err != nil || l.Concurrency != 16 || l.PromptTokens != 0 {
		t.Errorf(`ParseBusy("") = %+v %v, want 16 at once, prompts as long as the source allows`, l, err)
	}
}
