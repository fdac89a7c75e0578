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

	"p2pfault/event"
)

// EventLog writes a run's events to events.jsonl, one JSON object a line.
// It is safe for concurrent use.
type EventLog struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

// NewEventLog creates (or truncates) the events file at path.
func NewEventLog(path string) (*EventLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create events log %s: %w", path, err)
	}
	return &EventLog{path: path, f: f}, nil
}

// Write appends ev as one line. The line goes to the file in a single
// unbuffered write, so once Write returns the event is in the kernel and
// survives a crash of this process; `p2pfault report` can then rebuild the
// reports of a run that never got to write them.
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
	if _, err := l.f.Write(line); err != nil {
		return fmt.Errorf("write event %d to %s: %w", ev.Seq, l.path, err)
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
	syncErr := f.Sync()
	if err := f.Close(); err != nil {
		return fmt.Errorf("close events log %s: %w", l.path, err)
	}
	if syncErr != nil {
		return fmt.Errorf("sync events log %s: %w", l.path, syncErr)
	}
	return nil
}

// ReadEvents reads events.jsonl. A run that crashed leaves a file whose
// last line may be cut short and which has no end event: both are expected
// and reported as truncated, with every complete event before them. A line
// that does not parse anywhere else is damage, not a crash, and is an error
// naming its line number.
func ReadEvents(r io.Reader) (events []event.Event, truncated bool, err error) {
	br := bufio.NewReader(r)
	var (
		lineNo  int
		pending error // a bad line, fatal unless it turns out to be the last
		sawEnd  bool
	)
	for {
		line, readErr := br.ReadBytes('\n')
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
	return events, pending != nil || !sawEnd, nil
}
