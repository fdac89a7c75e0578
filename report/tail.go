package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"p2pfault/event"
)

// Tail reads an events file that a run may still be writing (`p2pfault
// replay --follow`): each Next returns the events of the lines completed
// since the last call. A line is complete at its newline (EventLog writes
// a line in one write), so a line being written is left for the next call.
// Lines are read by ReadEvents, as every other reader of the file does.
type Tail struct {
	path    string
	f       *os.File
	off     int64  // bytes of the file consumed
	partial []byte // a line without its newline yet
	line    int    // lines consumed, for messages
}

// OpenTail opens path for Tail reads from its first byte.
func OpenTail(path string) (*Tail, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("follow events %s: %w", path, err)
	}
	return &Tail{path: path, f: f}, nil
}

// Next returns the events of the lines completed since the last call
// (none when the file has not grown). A line that does not parse is an
// error naming it, and so is a file that shrank (another run truncated it).
func (t *Tail) Next() ([]event.Event, error) {
	st, err := t.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("follow events %s: %w", t.path, err)
	}
	if st.Size() < t.off {
		return nil, fmt.Errorf("follow events %s: the file shrank from %d to %d bytes (was it rewritten?)", t.path, t.off, st.Size())
	}
	if st.Size() == t.off {
		return nil, nil
	}
	buf := make([]byte, st.Size()-t.off)
	n, err := t.f.ReadAt(buf, t.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("follow events %s: %w", t.path, err)
	}
	t.off += int64(n)
	data := append(t.partial, buf[:n]...)
	cut := bytes.LastIndexByte(data, '\n')
	if cut < 0 {
		t.partial = data
		return nil, nil
	}
	complete := data[:cut+1]
	t.partial = append([]byte(nil), data[cut+1:]...)

	var out []event.Event
	for len(complete) > 0 {
		i := bytes.IndexByte(complete, '\n')
		line := complete[:i+1]
		complete = complete[i+1:]
		t.line++
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// ReadEvents takes a last line that does not parse for a crash's
		// cut; here the line is whole, so that is damage.
		evs, _, err := ReadEvents(bytes.NewReader(line))
		if err == nil && len(evs) != 1 {
			var ev event.Event
			if err = json.Unmarshal(bytes.TrimSpace(line), &ev); err == nil {
				err = errors.New("not an event")
			}
		}
		if err != nil {
			return out, fmt.Errorf("follow events %s: line %d: %w", t.path, t.line, err)
		}
		out = append(out, evs[0])
	}
	return out, nil
}

// Close closes the file.
func (t *Tail) Close() error { return t.f.Close() }
