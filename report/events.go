// Package report turns a run's events into what a pull request or a CI job
// reads: the seed's Markdown table, report.json, junit.xml, an SVG timeline,
// and events.jsonl itself, from which every other report can be rebuilt
// after the run, even after a crash.
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

	"github.com/klauspost/compress/zstd"

	"p2pfault/event"
	"p2pfault/safefile"
)

// EventLog writes a run's events to events.jsonl, one JSON object a line,
// plain or zstd-compressed. It is safe for concurrent use.
type EventLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
	zw   *zstd.Encoder // nil: plain
}

// NewEventLogWith creates (or truncates) the events file at path, written
// with compression c (CompressNone: plain); a symbolic link there is an
// error (safefile.Create).
func NewEventLogWith(path string, c Compression) (*EventLog, error) {
	// Never through a link: an events.jsonl planted as a symbolic link in
	// --out would have its target truncated.
	f, err := safefile.Create(path, safefile.ReportPerm)
	if err != nil {
		return nil, fmt.Errorf("create events log %s: %w", path, err)
	}
	l := &EventLog{path: path, f: f}
	if c == CompressZstd {
		if l.zw, err = zstdLog(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("create events log %s: %w", path, err)
		}
	}
	return l, nil
}

// Write appends ev as one line. A plain log writes the line to the file
// in a single unbuffered write, so once Write returns the event is in the
// kernel and survives a crash of this process; `p2pfault report` can then
// rebuild the reports of a run that never got to write them. A compressed
// log holds the line in its encoder until Flush (zstd compresses a burst
// of events as one block far better than each alone).
func (l *EventLog) Write(ev event.Event) error {
	line, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event %d (%s) for %s: %w", ev.Seq, ev.Kind, l.path, err)
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("write event %d to %s: log is closed", ev.Seq, l.path)
	}
	w := io.Writer(l.f)
	if l.zw != nil {
		w = l.zw
	}
	if _, err := w.Write(line); err != nil {
		return fmt.Errorf("write event %d to %s: %w", ev.Seq, l.path, err)
	}
	return nil
}

// Flush writes what a compressed log holds as one whole zstd block, so
// the file decodes up to here even if the process dies before Close; a
// plain log has nothing to flush. The run flushes whenever no event is
// waiting to be written.
func (l *EventLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil || l.zw == nil {
		return nil
	}
	if err := l.zw.Flush(); err != nil {
		return fmt.Errorf("flush %s: %w", l.path, err)
	}
	return nil
}

// Close syncs the file to disk and closes it. Closing twice is a no-op.
func (l *EventLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	var endErr error
	if l.zw != nil {
		endErr = l.zw.Close() // the frame's end and checksum
	}
	syncErr := f.Sync()
	if err := f.Close(); err != nil {
		return fmt.Errorf("close events log %s: %w", l.path, err)
	}
	if endErr != nil {
		return fmt.Errorf("end events log %s: %w", l.path, endErr)
	}
	if syncErr != nil {
		return fmt.Errorf("sync events log %s: %w", l.path, syncErr)
	}
	return nil
}

// ReadEvents reads events.jsonl, plain or zstd-compressed (told apart by
// the content: a zstd frame's magic number). A run that crashed leaves a
// file whose last line may be cut short (compressed: whose frame stops
// mid-way) and which has no end event: both are expected and reported as
// truncated, with every complete event before them. A line that does not
// parse anywhere else is damage, not a crash, and is an error naming its
// line number.
func ReadEvents(r io.Reader) (events []event.Event, truncated bool, err error) {
	src, done, err := eventsReader(r)
	if err != nil {
		return nil, true, err
	}
	defer done()
	br := bufio.NewReader(src)
	cut := false
	var (
		lineNo  int
		pending error // a bad line, fatal unless it turns out to be the last
		sawEnd  bool
	)
	for {
		line, readErr := br.ReadBytes('\n')
		if cutShort(readErr) {
			cut, readErr = true, io.EOF // a crash's end: what came before stands
		}
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return events, true, fmt.Errorf("read events line %d: %w", lineNo+1, readErr)
		}
		if len(line) > 0 {
			lineNo++
			if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
				if pending != nil {
					return events, true, pending
				}
				var ev event.Event
				if err := json.Unmarshal(trimmed, &ev); err != nil {
					pending = fmt.Errorf("events line %d: %w", lineNo, err)
				} else {
					events = append(events, ev)
					sawEnd = sawEnd || ev.Kind == event.KindEnd
				}
			}
		}
		if readErr != nil { // io.EOF
			break
		}
	}
	return events, cut || pending != nil || !sawEnd, nil
}
