package cli

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/exitcode"
	"p2pfault/internal/syncbuf"
)

// TestASecondSIGQUITDumpsTheStacks: the first signal ends the context with
// an interruption naming it (exit 130); a SIGQUIT after it writes every
// goroutine's stack to stderr, as Go's own SIGQUIT would, and ends
// nothing more. The signals go to this test process, whose handlers
// notifySignals installed.
func TestASecondSIGQUITDumpsTheStacks(t *testing.T) {
	var stderr syncbuf.Buffer
	ctx, stop := notifySignals(context.Background(), &stderr)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not end the context within 10 s")
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, exitcode.ErrInterrupted) || exitcode.Code(cause) != exitcode.Interrupted ||
		cause.Error() != "interrupted by SIGHUP (the terminal closed)" {
		t.Fatalf("cause %q (exit %d), want the interruption by SIGHUP, exit 130", cause, exitcode.Code(cause))
	}
	if stderr.String() != "" {
		t.Fatalf("the first signal wrote %q", stderr.String())
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), "TestASecondSIGQUITDumpsTheStacks") {
		if time.Now().After(deadline) {
			t.Fatalf("no stack dump naming this test on stderr 10 s after the second SIGQUIT:\n%.2000s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if context.Cause(ctx) != cause {
		t.Errorf("the second signal changed the cause to %v", context.Cause(ctx))
	}
}
