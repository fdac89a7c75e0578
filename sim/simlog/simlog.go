// Package simlog writes the simulated engine's log lines in vLLM's shape:
// "INFO 11-29 15:52:27 [p2p] peer 127.0.0.1:7777 connected", one event per
// line, so a person can read them and the experiment can pick them out.
package simlog

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Logger writes lines to one writer. Each line goes out in a single Write,
// so lines from the front end and the engine core sharing a stderr pipe do
// not interleave mid-line.
type Logger struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// New returns a logger writing to w with the wall clock.
func New(w io.Writer) *Logger { return &Logger{w: w, now: time.Now} }

// WithClock returns a logger that stamps lines with now (for tests).
func WithClock(w io.Writer, now func() time.Time) *Logger { return &Logger{w: w, now: now} }

// Info logs a normal event.
func (l *Logger) Info(component, format string, args ...any) {
	l.line("INFO", component, format, args...)
}

// Warning logs an event an operator should notice (a peer down, a timeout).
func (l *Logger) Warning(component, format string, args ...any) {
	l.line("WARNING", component, format, args...)
}

// Error logs a failure.
func (l *Logger) Error(component, format string, args ...any) {
	l.line("ERROR", component, format, args...)
}

func (l *Logger) line(level, component, format string, args ...any) {
	if l == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	// One event per line: a message must not start a line of its own.
	msg = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	line := fmt.Sprintf("%s %s [%s] %s\n", level, l.now().Format("01-02 15:04:05"), component, msg)
	_, _ = io.WriteString(l.w, line)
}
