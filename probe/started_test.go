package probe_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
	"p2pfault/probe"
)

// startLog collects what Config.Started was told, with when.
type startLog struct {
	mu     sync.Mutex
	starts []event.PullStart
	at     []time.Time
	track  *probe.InFlight
}

func (l *startLog) add(p event.PullStart) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts = append(l.starts, p)
	l.at = append(l.at, time.Now())
	l.track.Started(p) // under the lock: pending sees the log and the tracker agree
}

// pending is the tracker's snapshot of source src at now, with the start
// of the first pull the log has naming src, taken together.
func (l *startLog) pending(now time.Duration, src int) (probe.Pending, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := time.Duration(-1)
	for _, st := range l.starts {
		if st.Source == src && (first < 0 || st.Start < first) {
			first = st.Start
		}
	}
	return pendingOf(l.track.Snapshot(now), src), first
}

func (l *startLog) all() []event.PullStart {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event.PullStart(nil), l.starts...)
}

// TestStartedReportsHungPullsBeforeTheyEnd: pulls naming a hung source are
// reported when they are sent, so a face can count them and age the oldest
// while no event.Sample has come back; each later event.Sample matches its start.
// TestStartedReportsHungPullsBeforeTheyEnd runs on the fake clock: a pull's
// start, the abort and the snapshots' ages are exact there.
func TestStartedReportsHungPullsBeforeTheyEnd(t *testing.T) {
	synctest.Test(t, testStartedReportsHungPullsBeforeTheyEnd)
}

func testStartedReportsHungPullsBeforeTheyEnd(t *testing.T) {
	c := newVirtualCluster(t, 2)
	c.setPullMode(0, modeHang)
	cfg := c.config()
	cfg.Interval = 40 * time.Millisecond
	cfg.PromptTokens = 130
	cfg.PullTimeout = time.Minute
	log := &startLog{track: probe.NewInFlight()}
	cfg.Started = log.add
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)

	// snapshot ends what has come back and returns the pulls in flight on
	// source src now. The test waits for what it needs to see, as a loaded
	// machine can make any fixed wait too short.
	var first time.Duration // the first pull naming source 0, at the first snapshot
	snapshot := func(src int) (time.Duration, probe.Pending) {
		for _, s := range r.samples() {
			log.track.Ended(s.Sample)
		}
		now := time.Since(r.t0)
		p, f := log.pending(now, src)
		if src == 0 {
			first = f
		}
		return now, p
	}
	var now1, now2 time.Duration
	var snap1, snap2 probe.Pending
	waitFor(t, func() bool { now1, snap1 = snapshot(0); return snap1.N >= 5 })
	first1 := first
	waitFor(t, func() bool { now2, snap2 = snapshot(0); return snap2.N > snap1.N })

	for _, s := range r.samples() {
		if s.Source == 0 {
			t.Fatalf("a pull naming hung source 0 ended: %+v", s.Sample)
		}
	}
	// The oldest is the first pull naming source 0: it was in flight in
	// both snapshots and aged by exactly the time between them.
	if snap1.Oldest != now1-first1 {
		t.Errorf("oldest pull on source 0 is %s old at %s, want the first pull's age, %s", snap1.Oldest, now1, now1-first1)
	}
	if grown := snap2.Oldest - snap1.Oldest; grown != now2-now1 {
		t.Errorf("oldest pull on source 0 aged %s between snapshots %s apart", grown, now2-now1)
	}
	// Source 1's pulls end in milliseconds: however many a loaded machine
	// holds up at a moment, they do not pile up as source 0's do.
	waitFor(t, func() bool { _, sp := snapshot(1); return sp.N <= 2 })

	abortAt := time.Since(r.t0)
	p.Abort()
	got := r.stop(10 * time.Second)
	// No pull is sent once the run was aborted: a trial seeding then
	// records its pull as not sent.
	for _, st := range log.all() {
		if st.Start > abortAt {
			t.Errorf("trial %d was sent at %s, after the abort at %s", st.Trial, st.Start, abortAt)
		}
	}
	starts := map[int64]event.PullStart{}
	for _, st := range log.all() {
		if _, dup := starts[st.Trial]; dup {
			t.Errorf("trial %d started twice", st.Trial)
		}
		starts[st.Trial] = st
	}
	sent := 0
	for _, s := range got {
		st, ok := starts[s.Trial]
		if !ok && s.Aborted && strings.HasPrefix(s.Err, "not sent: ") {
			continue // seeding when the abort came: its pull was never sent
		}
		sent++
		if !ok {
			t.Errorf("trial %d (source %d) ended with no start reported", s.Trial, s.Source)
			continue
		}
		// Started is told just before the pull's clock starts: at the
		// same instant of the fake clock.
		if st.Source != s.Source || st.Start != s.Start {
			t.Errorf("trial %d: start %+v does not match its sample (source %d, start %s)", s.Trial, st, s.Source, s.Start)
		}
		log.track.Ended(s.Sample)
	}
	if sent != len(starts) {
		t.Errorf("%d samples of pulls sent for %d starts", sent, len(starts))
	}
	if n := log.track.Len(); n != 0 {
		t.Errorf("%d pulls still in flight after every sample ended: %+v", n, log.track.Snapshot(time.Since(r.t0)))
	}
}

// TestWarmupReportsNoStarts: warm-up pulls have no event.Sample on Run's channel,
// so reporting them would leave them in flight forever.
func TestWarmupReportsNoStarts(t *testing.T) {
	c := newFakeCluster(t, 1)
	cfg := c.config()
	var n int
	var mu sync.Mutex
	cfg.Started = func(event.PullStart) { mu.Lock(); n++; mu.Unlock() }
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Warmup(context.Background(), 5*time.Second); err != nil {
		t.Fatalf("Warmup: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 0 {
		t.Errorf("warm-up reported %d pull starts, want none", n)
	}
}

func TestInFlightSnapshot(t *testing.T) {
	f := probe.NewInFlight()
	f.Started(event.PullStart{Source: 1, Trial: 1, Start: 3 * time.Second})
	f.Started(event.PullStart{Source: 0, Trial: 2, Start: 2 * time.Second})
	f.Started(event.PullStart{Source: 1, Trial: 3, Start: 1 * time.Second})
	f.Started(event.PullStart{Source: 1, Trial: 5, Start: 4 * time.Second})
	f.Ended(event.Sample{Source: 1, Trial: 5})
	f.Ended(event.Sample{Source: 1, Trial: 99}) // a cap hit: never started
	got := f.Snapshot(5 * time.Second)
	if len(got) != 2 || got[0].Source != 0 || got[1].Source != 1 {
		t.Fatalf("snapshot %+v, want sources 0 and 1 in order", got)
	}
	if got[0].N != 1 || got[0].Oldest != 3*time.Second {
		t.Errorf("source 0: %+v, want 1 in flight, oldest 3s", got[0])
	}
	if got[1].N != 2 || got[1].Oldest != 4*time.Second || got[1].Starts[0] != time.Second || got[1].Starts[1] != 3*time.Second {
		t.Errorf("source 1: %+v, want 2 in flight, oldest 4s, starts [1s 3s]", got[1])
	}
	f.Ended(event.Sample{Source: 0, Trial: 2})
	if got := f.Snapshot(5 * time.Second); len(got) != 1 || got[0].Source != 1 {
		t.Errorf("after source 0's pull ended: %+v, want only source 1", got)
	}
}

func pendingOf(ps []probe.Pending, source int) probe.Pending {
	for _, p := range ps {
		if p.Source == source {
			return p
		}
	}
	return probe.Pending{Source: source}
}
