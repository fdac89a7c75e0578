package experiment

import (
	"context"
	"sync"
	"time"

	"p2pfault/event"
)

// bus is where the experiments of one run publish their events: one
// sequence and one wall clock for every arm, so the stream the faces read
// is in order across arms (a Group shares one bus between its arms; a lone
// Experiment has its own).
type bus struct {
	mu   sync.Mutex
	subs []chan event.Event
	seq  int64
	open int // arms whose Run has not ended yet
}

func newBus(arms int) *bus { return &bus{open: arms} }

func (b *bus) subscribe() <-chan event.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	ch := make(chan event.Event, 4096)
	b.subs = append(b.subs, ch)
	return ch
}

// publish stamps ev's sequence and wall time (and T, given the arm's t0)
// and hands it to every subscriber, in order.
func (b *bus) publish(ev event.Event, t0 time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	ev.Wall = time.Now()
	if !t0.IsZero() {
		ev.T = ev.Wall.Sub(t0)
	}
	for _, ch := range b.subs {
		ch <- ev
	}
}

// leave is an arm's Run ending; the last one closes every subscription.
func (b *bus) leave() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open--; b.open > 0 {
		return
	}
	for _, ch := range b.subs {
		close(ch)
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
