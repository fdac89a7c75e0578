package syncbuf

import (
	"io"
	"strings"
	"sync"
	"testing"
)

// Writers and a reader at once: the race detector would flag an unlocked
// buffer, and every byte written must come out once.
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	var got strings.Builder
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	buf := make([]byte, 7)
	for {
		n, err := b.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			select {
			case <-done:
				rest, _ := io.ReadAll(&b)
				got.Write(rest)
				if got.Len() != 400 || strings.Trim(got.String(), "x") != "" {
					t.Fatalf("read %d bytes %q, want 400 x", got.Len(), got.String()[:min(got.Len(), 20)])
				}
				return
			default:
			}
		}
	}
}
