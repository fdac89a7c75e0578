package engine

import (
	"sync"
	"testing"
	"time"

	"p2pfault/internal/syncbuf"
	"p2pfault/sim/simlog"
)

// queueLog records what OnQueues reports.
type queueLog struct {
	mu  sync.Mutex
	all []Queues
}

func (q *queueLog) add(v Queues) { q.mu.Lock(); q.all = append(q.all, v); q.mu.Unlock() }
func (q *queueLog) last() (Queues, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.all) == 0 {
		return Queues{}, 0
	}
	return q.all[len(q.all)-1], len(q.all)
}

// startWithQueues is startEngine with OnQueues set before the first step.
// Its lookup and heartbeat timeouts are long: a pull held on a frozen
// source stays held however slowly the test gets to look at it.
func startWithQueues(t *testing.T, q *queueLog) *driven {
	t.Helper()
	log := &syncbuf.Buffer{}
	cfg := testConfig()
	cfg.LookupTimeout, cfg.HeartbeatTimeout = 10*time.Second, 10*time.Second
	host := hostFor(t)
	if host != nil {
		cfg.Net = host
	}
	e, err := New(cfg, simlog.New(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Listen(); err != nil {
		t.Fatal(err)
	}
	e.OnQueues(q.add)
	d := &driven{Engine: e, log: log, calls: make(chan func()), stop: make(chan struct{}), ended: make(chan struct{}), host: host}
	e.Start()
	go d.loop()
	t.Cleanup(d.shutdown)
	return d
}

// TestQueuesCountPullsHeldOnAFrozenPeerAsWaiting: a pull whose lookup a
// frozen source never answers waits in the decoder's queue, as vLLM's
// scheduler keeps a deferred request in its waiting queue; once the source
// answers, the queues drain and the change is reported.
func TestQueuesCountPullsHeldOnAFrozenPeerAsWaiting(t *testing.T) {
	virtual(t, func(t *testing.T) {
		src := startEngine(t, nil)
		var q queueLog
		dec := startWithQueues(t, &q)
		waitFor(t, "the first report", func() bool { _, n := q.last(); return n > 0 })
		if v, _ := q.last(); v != (Queues{}) {
			t.Fatalf("idle decoder reports %+v, want empty queues", v)
		}
		p := prompt(t.Name(), 40)
		run(t, src, Request{Tokens: p, MaxTokens: 1})
		warm(t, src, dec)

		src.setPaused(true)
		var done []<-chan outcome
		for i := range 3 {
			done = append(done, runAsync(dec, pull(src, prompt(t.Name()+string(rune('a'+i)), 40), "q"+string(rune('a'+i)))))
		}
		waitFor(t, "3 pulls waiting", func() bool { v, _ := q.last(); return v.Waiting == 3 })
		// Held, not running: the frozen source has answered no lookup.
		time.Sleep(5 * dec.cfg.Tick)
		if v, _ := q.last(); v.Waiting != 3 || v.Running != 0 {
			t.Errorf("while the source is frozen: %+v, want 3 waiting and none running", v)
		}
		src.setPaused(false)
		for _, ch := range done {
			<-ch
		}
		waitFor(t, "the queues drained", func() bool { v, _ := q.last(); return v == (Queues{}) })
		q.mu.Lock()
		defer q.mu.Unlock()
		for i := 1; i < len(q.all); i++ {
			if q.all[i] == q.all[i-1] {
				t.Errorf("report %d repeats %+v: only changes are reported", i, q.all[i])
			}
		}
	})
}
