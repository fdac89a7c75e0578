package session

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"p2pfault/internal/enginetest"
)

// A session that acts on its SIGTERM is left alone once gone: Drain
// returns well within the grace and sends no SIGKILL it does not need.
func TestDrainReturnsOnceASessionEndsWithinTheGrace(t *testing.T) {
	sid := enginetest.StartSession(t)
	if _, err := Signal(sid, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// A grace far beyond any delay a busy machine adds: a Drain that waited
	// it out is told from one that did not by minutes, not by a margin.
	const grace = 2 * time.Minute
	start := time.Now()
	if err := Drain(context.Background(), sid, grace, time.Second, nil); err != nil {
		t.Fatalf("Drain after SIGTERM: %v", err)
	}
	if took := time.Since(start); took >= grace/2 {
		t.Errorf("Drain took %v: it waited for the grace of a session already gone", took)
	}
}

// A stopped session does not act on SIGTERM: Drain waits out the grace,
// SIGKILLs it and returns once no process of it is left.
func TestDrainKillsWhatOutlivesTheGrace(t *testing.T) {
	sid := enginetest.StartSession(t)
	bystander := enginetest.StartSession(t)
	ms, err := Members(sid)
	if err != nil {
		t.Fatal(err)
	}
	// Stopped before the SIGTERM is sent: a SIGSTOP still pending would be
	// taken after the lower-numbered SIGTERM, which would end the session.
	if _, _, err := Stop(context.Background(), sid, ms); err != nil {
		t.Fatal(err)
	}
	if _, err := Signal(sid, unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	const grace = 300 * time.Millisecond
	start := time.Now()
	if err := Drain(context.Background(), sid, grace, 5*time.Second, nil); err != nil {
		t.Fatalf("Drain of a stopped session: %v", err)
	}
	if took := time.Since(start); took < grace {
		t.Errorf("Drain returned after %v, before the grace of %v", took, grace)
	}
	if live, err := Live(sid); err != nil || len(live) != 0 {
		t.Errorf("session %d after Drain: live %v, %v; want none", sid, live, err)
	}
	if live, _ := Live(bystander); len(live) != 2 {
		t.Errorf("bystander lost members: %v", live)
	}
}

// After the caller's own SIGKILL (grace 0) only the wait is left, and a
// cancelled context does not cut it short: the wait still sees a live
// context, and the session is gone when Drain returns.
func TestDrainAfterSIGKILLWaitsEvenWhenCancelled(t *testing.T) {
	sid := enginetest.StartSession(t)
	if _, err := Signal(sid, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waits := 0
	gone := func(wctx context.Context) error {
		waits++
		if err := wctx.Err(); err != nil {
			return err
		}
		return WaitGone(wctx, sid, time.Millisecond)
	}
	if err := Drain(ctx, sid, 0, 5*time.Second, gone); err != nil {
		t.Fatalf("Drain after SIGKILL with a cancelled context: %v", err)
	}
	if waits != 1 {
		t.Errorf("gone asked %d times, want once (no grace after the caller's SIGKILL)", waits)
	}
	if live, err := Live(sid); err != nil || len(live) != 0 {
		t.Errorf("session %d after Drain: live %v, %v; want none", sid, live, err)
	}
}
