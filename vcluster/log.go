package vcluster

import (
	"bytes"
	"strings"
	"sync"
)

// lineWriter is an engine's log output cut into lines, each told to emit
// as it is completed (what a launched engine's log pipe gives the runner).
type lineWriter struct {
	emit func(line string)

	mu  sync.Mutex
	buf []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.buf = append(w.buf, b...)
	var lines []string
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	w.mu.Unlock()
	for _, l := range lines {
		w.emit(l)
	}
	return len(b), nil
}

// flush tells the last line even without its newline (an engine killed
// mid-line).
func (w *lineWriter) flush() {
	w.mu.Lock()
	rest := string(w.buf)
	w.buf = nil
	w.mu.Unlock()
	if rest != "" {
		w.emit(rest)
	}
}

// tail keeps an engine's last lines, across its restarts, as the runner's
// log tail does.
type tail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 2*t.max {
		t.lines = append([]string(nil), t.lines[len(t.lines)-t.max:]...)
	}
}

// last is the last n lines (all with n <= 0 or more than kept).
func (t *tail) last(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keep := t.lines
	if len(keep) > t.max {
		keep = keep[len(keep)-t.max:]
	}
	if n > 0 && n < len(keep) {
		keep = keep[len(keep)-n:]
	}
	return append([]string(nil), keep...)
}
