// Package syncbuf is a bytes.Buffer that one goroutine may write while
// another reads it: a child process's output copied in by os/exec, an
// engine's log, a program's terminal, read by a test as they grow.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write, Read and String. The zero value is
// an empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Read consumes what was written, as bytes.Buffer's Read does.
func (s *Buffer) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Read(p)
}

// String is everything written and not yet read.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
