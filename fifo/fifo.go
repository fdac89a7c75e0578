// Package fifo hands values to one consumer, in the order they were put,
// from a goroutine of its own, so that whoever puts never waits for the
// consumer: the queue between them is unbounded unless a put says
// otherwise. A run's event bus (a face that stops reading must hold up
// neither the run nor another face) and the runner's log and state
// callbacks (an engine's lock must never be held while user code runs)
// both need exactly this.
package fifo

import "sync"

// Queue delivers what is put to its consumer in order. Its goroutine
// starts with the first Put or Close, so a queue nothing is ever put on
// leaves none behind.
type Queue[T any] struct {
	deliver func(T)
	finish  func()
	wake    chan struct{} // one token: the queue grew or closed
	done    chan struct{}

	mu      sync.Mutex
	queue   []T
	closed  bool
	started bool
}

// New returns a queue whose goroutine calls deliver for each value put,
// in order, and finish (if not nil) once Close was called and every value
// put before it was delivered.
func New[T any](deliver func(T), finish func()) *Queue[T] {
	return &Queue[T]{deliver: deliver, finish: finish, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Put queues v and reports whether it did: not after Close, and not when
// limit > 0 values already wait (a consumer that fell that far behind
// loses what can be lost; limit 0 never drops).
func (q *Queue[T]) Put(v T, limit int) bool {
	return q.update(func() bool {
		if q.closed || (limit > 0 && len(q.queue) >= limit) {
			return false
		}
		q.queue = append(q.queue, v)
		return true
	})
}

// Close ends the queue: what was put is still delivered, then finish is
// called and Done closed. Closing twice is closing once.
func (q *Queue[T]) Close() {
	q.update(func() bool {
		q.closed = true
		return true
	})
}

// Done is closed once Close was called and everything was delivered.
func (q *Queue[T]) Done() <-chan struct{} { return q.done }

func (q *Queue[T]) update(change func() bool) bool {
	q.mu.Lock()
	ok := change()
	start := ok && !q.started
	q.started = q.started || ok
	q.mu.Unlock()
	if start {
		go q.run()
	}
	if ok {
		select {
		case q.wake <- struct{}{}:
		default: // a token is waiting already
		}
	}
	return ok
}

func (q *Queue[T]) run() {
	defer close(q.done)
	if q.finish != nil {
		defer q.finish()
	}
	for {
		q.mu.Lock()
		batch, closed := q.queue, q.closed
		q.queue = nil
		q.mu.Unlock()
		for _, v := range batch {
			q.deliver(v)
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return
		}
		<-q.wake
	}
}
