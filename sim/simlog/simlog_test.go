package simlog

import (
	"bytes"
	"testing"
	"time"
)

func TestLineShape(t *testing.T) {
	at := time.Date(2025, 11, 29, 15, 52, 27, 0, time.UTC)
	tests := []struct {
		name string
		log  func(*Logger)
		want string
	}{
		{"info names level, time and component", func(l *Logger) { l.Info("p2p", "peer %s connected", "127.0.0.1:7777") },
			"INFO 11-29 15:52:27 [p2p] peer 127.0.0.1:7777 connected\n"},
		{"warning", func(l *Logger) { l.Warning("p2p", "peer %s down: %s", "h:1", "reset") },
			"WARNING 11-29 15:52:27 [p2p] peer h:1 down: reset\n"},
		{"error", func(l *Logger) { l.Error("api_server", "engine core died") },
			"ERROR 11-29 15:52:27 [api_server] engine core died\n"},
		{"newlines in a message stay on one line", func(l *Logger) { l.Info("engine", "a\nb\r\nc") },
			"INFO 11-29 15:52:27 [engine] a b c\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.log(WithClock(&buf, func() time.Time { return at }))
			if got := buf.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A nil Logger (a component given none) discards every line: each level
// returns without touching a writer, where a Logger with no writer panics.
func TestNilLoggerDiscards(t *testing.T) {
	var l *Logger
	for name, log := range map[string]func(){
		"Info":    func() { l.Info("x", "dropped") },
		"Warning": func() { l.Warning("x", "dropped") },
		"Error":   func() { l.Error("x", "dropped") },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("a nil Logger's %s panicked: %v", name, r)
				}
			}()
			log()
		})
	}
}
