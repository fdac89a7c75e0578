package ui

// ring is a bounded FIFO: pushing onto a full ring drops the oldest item,
// so the dashboard's memory stays flat however long a run lasts. The backing
// array grows on demand up to limit, so a short run does not pay for a long one.
type ring[T any] struct {
	buf   []T
	head  int // index of the oldest item
	n     int
	limit int
}

func newRing[T any](limit int) ring[T] {
	if limit < 1 {
		limit = 1
	}
	return ring[T]{limit: limit}
}

func (r *ring[T]) Len() int { return r.n }

// Push appends v, dropping the oldest item when the ring is full.
func (r *ring[T]) Push(v T) {
	if r.n < len(r.buf) {
		r.buf[(r.head+r.n)%len(r.buf)] = v
		r.n++
		return
	}
	if len(r.buf) < r.limit {
		r.grow()
		r.buf[r.n] = v
		r.n++
		return
	}
	r.buf[r.head] = v
	r.head = (r.head + 1) % len(r.buf)
}

// grow doubles the backing array (up to limit), unrolling it so the oldest
// item is at index 0.
func (r *ring[T]) grow() {
	size := 2 * len(r.buf)
	if size < 16 {
		size = 16
	}
	if size > r.limit {
		size = r.limit
	}
	buf := make([]T, size)
	for i := 0; i < r.n; i++ {
		buf[i] = r.buf[(r.head+i)%len(r.buf)]
	}
	r.buf = buf
	r.head = 0
}

// At returns the i-th oldest item; i must be in [0, Len()).
func (r *ring[T]) At(i int) T { return r.buf[(r.head+i)%len(r.buf)] }

// Front returns the oldest item; the ring must not be empty.
func (r *ring[T]) Front() T { return r.buf[r.head] }

// Back returns the newest item; the ring must not be empty.
func (r *ring[T]) Back() T { return r.At(r.n - 1) }

// PopFront drops the oldest item.
func (r *ring[T]) PopFront() {
	if r.n == 0 {
		return
	}
	var zero T
	r.buf[r.head] = zero // let the GC have what it pointed to
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}

// Last returns up to n of the newest items, oldest first, in a new slice.
func (r *ring[T]) Last(n int) []T {
	if n > r.n {
		n = r.n
	}
	if n < 0 {
		n = 0
	}
	out := make([]T, 0, n)
	for i := r.n - n; i < r.n; i++ {
		out = append(out, r.At(i))
	}
	return out
}
