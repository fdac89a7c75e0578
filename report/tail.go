package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"p2pfault/event"
)

// tailPoll is how often a followed file that has not grown is looked at.
const tailPoll = 100 * time.Millisecond

// Tail follows an events file that a run may still be writing (`p2pfault
// replay --follow`). A goroutine reads the file as a stream that waits at
// its end for more, so a line is read once its newline is written (a
// plain EventLog writes a line in one write) and a line being written is
// left until it is whole. Each line is read by ReadEvents, as every other
// reader of the file does. Next hands over what it has read since the
// last call.
type Tail struct {
	path string
	f    *os.File
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	pending []event.Event
	err     error
}

// OpenTail follows path from its first byte, leaving out its first skip
// events (those a ReadEvents of the file already gave).
func OpenTail(path string, skip int) (*Tail, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("follow events %s: %w", path, err)
	}
	t := &Tail{path: path, f: f, done: make(chan struct{})}
	t.wg.Add(1)
	go t.read(skip)
	return t, nil
}

// Next returns the events read since the last call (none when the file
// has not grown), then the error that stopped the reading: a line that
// does not parse, or a file that shrank (another run rewrote it).
func (t *Tail) Next() ([]event.Event, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.pending
	t.pending = nil
	if len(out) > 0 {
		return out, nil
	}
	return nil, t.err
}

// Close stops the reading and closes the file.
func (t *Tail) Close() error {
	close(t.done)
	t.wg.Wait()
	return t.f.Close()
}

func (t *Tail) read(skip int) {
	defer t.wg.Done()
	br := bufio.NewReader(&growing{f: t.f, done: t.done})
	for line := 1; ; line++ {
		raw, err := br.ReadBytes('\n')
		if err != nil {
			if !errors.Is(err, errTailClosed) {
				t.fail(fmt.Errorf("follow events %s: %w", t.path, err))
			}
			return // a half-written last line stays unread
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		// ReadEvents takes a last line that does not parse for a crash's
		// cut; here the line is whole, so that is damage.
		evs, _, err := ReadEvents(bytes.NewReader(raw))
		if err == nil && len(evs) != 1 {
			var ev event.Event
			if err = json.Unmarshal(bytes.TrimSpace(raw), &ev); err == nil {
				err = errors.New("not an event")
			}
		}
		if err != nil {
			t.fail(fmt.Errorf("follow events %s: line %d: %w", t.path, line, err))
			return
		}
		if skip > 0 {
			skip--
			continue
		}
		t.mu.Lock()
		t.pending = append(t.pending, evs[0])
		t.mu.Unlock()
	}
}

func (t *Tail) fail(err error) {
	t.mu.Lock()
	t.err = err
	t.mu.Unlock()
}

var errTailClosed = errors.New("tail closed")

// growing reads a file that is still being written: at its end it waits
// for more instead of returning io.EOF, until done is closed.
type growing struct {
	f    *os.File
	done <-chan struct{}
	off  int64
}

func (g *growing) Read(p []byte) (int, error) {
	for {
		n, err := g.f.Read(p)
		g.off += int64(n)
		if n > 0 {
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if st, err := g.f.Stat(); err == nil && st.Size() < g.off {
			return 0, fmt.Errorf("the file shrank from %d to %d bytes (was it rewritten?)", g.off, st.Size())
		}
		select {
		case <-g.done:
			return 0, errTailClosed
		case <-time.After(tailPoll):
		}
	}
}
