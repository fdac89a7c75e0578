package runner

import (
	"bufio"
	"io"
	"sync"
)

// ring keeps the last n log lines of an engine for the dashboard and for
// start errors; memory stays bounded however long the run.
type ring struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newRing(n int) *ring { return &ring{lines: make([]string, n)} }

func (r *ring) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines[r.next] = line
	r.next++
	if r.next == len(r.lines) {
		r.next, r.full = 0, true
	}
}

// last returns up to n of the most recent lines, oldest first.
func (r *ring) last(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := r.next
	if r.full {
		size = len(r.lines)
	}
	if n > size {
		n = size
	}
	if n <= 0 {
		return nil
	}
	out := make([]string, 0, n)
	start := r.next - n
	if start < 0 {
		start += len(r.lines)
	}
	for i := 0; i < n; i++ {
		out = append(out, r.lines[(start+i)%len(r.lines)])
	}
	return out
}

// maxLine bounds one log line: a longer one is cut so a runaway engine
// cannot make p2pfault buffer without limit.
const maxLine = 64 * 1024

// readLines calls fn for each line of r (without the newline) until EOF.
func readLines(r io.Reader, fn func(string)) {
	br := bufio.NewReaderSize(r, 4096)
	var long []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			if len(long) > 0 {
				fn(string(long))
			}
			return
		}
		if room := maxLine - len(long); room > 0 {
			long = append(long, chunk[:min(room, len(chunk))]...)
		}
		if !isPrefix {
			fn(string(long))
			long = long[:0]
		}
	}
}
