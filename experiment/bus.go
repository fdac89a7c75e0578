package experiment

import (
	"context"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/fifo"
)

// bus is where the experiments of one run publish their events: one
// sequence and one wall clock for every arm, so the stream the faces read
// is in order across arms (a Group shares one bus between its arms; a lone
// Experiment has its own).
//
// A slow subscriber gets a queue of its own, unbounded: publish appends to
// every subscriber's queue and returns, and a goroutine per subscriber
// hands its queue to its channel in order. No event is dropped (reports
// are built from them) and none is reordered, and a face that stops
// reading (a dashboard suspended, a writer stuck on a full disk) holds
// nothing up: not the run, not a fault firing, not another face. What it
// costs is the memory of what that one face has not read yet, a run's
// events at most.
//
// The bus's lock is the stream's one order: publish takes it, and the
// event it sends is made under it (next), so an event computed from a
// part's state (a source's condition) is sent in the order it was
// computed. next may take a part's own lock; nothing holding one of those
// publishes.
type bus struct {
	mu   sync.Mutex
	subs []*fifo.Queue[event.Event] // each face's queue, handed to its channel
	seq  int64
	open int // arms whose Run has not ended yet
}

func newBus(arms int) *bus { return &bus{open: arms} }

// subscriberBuffer is a subscription channel's buffer. The queue behind
// it is what absorbs a slow face, so the buffer only saves the pump a
// wake-up per event; it need not hold a burst.
const subscriberBuffer = 64

func (b *bus) subscribe() <-chan event.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan event.Event, subscriberBuffer)
	b.subs = append(b.subs, fifo.New(func(ev event.Event) { ch <- ev }, func() { close(ch) }))
	return ch
}

// publish makes the next event (next: the event, the arm's t0, and
// whether there is one to send), stamps its sequence and wall time (and
// T, given t0) and queues it for every subscriber, in order. It never
// waits for a subscriber.
func (b *bus) publish(next func() (ev event.Event, t0 time.Time, ok bool)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ev, t0, ok := next()
	if !ok {
		return
	}
	b.seq++
	ev.Seq = b.seq
	ev.Wall = time.Now()
	if !t0.IsZero() {
		ev.T = ev.Wall.Sub(t0)
	}
	for _, s := range b.subs {
		s.Put(ev, 0)
	}
}

// leave is an arm's Run ending; the last one closes every subscription
// (each channel closes once its queue is handed over).
func (b *bus) leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open--; b.open > 0 {
		return
	}
	for _, s := range b.subs {
		s.Close()
	}
	b.subs = nil
}

// startLine gives the arms of a run one t0: each arm arrives when its
// warm-up is done, and all start measuring when the last has arrived (or
// left, having failed before it), so one timeline plays on one clock.
type startLine struct {
	mu      sync.Mutex
	waiting int // arms not yet arrived or left
	ready   chan struct{}
	t0      time.Time
}

func newStartLine(arms int) *startLine {
	return &startLine{waiting: arms, ready: make(chan struct{})}
}

func (l *startLine) count() {
	if l.waiting--; l.waiting == 0 {
		l.t0 = time.Now()
		close(l.ready)
	}
}

// arrive waits for every other arm and returns the shared t0.
func (l *startLine) arrive(ctx context.Context) (time.Time, error) {
	l.mu.Lock()
	l.count()
	l.mu.Unlock()
	select {
	case <-l.ready:
		return l.t0, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// leave is an arm that will never arrive.
func (l *startLine) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count()
}
