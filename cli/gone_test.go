package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/report"
)

// TestTheGoneCaseIsIssue56828 runs `run --case gone` as a user would, with
// nothing but the case, on the virtual cluster: its preset gives a DP-2
// source in PD mode with loads in flight (2.1 s each), and the why table's
// "before" lines are #56828's timeline: the loads caught on rank 0, whose
// connection reset, fall back at once; those on rank 1, whose session only
// fell silent, wait the load timeout and the abort-ack timeout (36–43 s in
// the issue), as do rank 1's legs sent in the window before its heartbeat
// reaps the session, and never rank 0's; faulted_max fails.
func TestTheGoneCaseIsIssue56828(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	out := t.TempDir()
	var r virtualRun
	synctest.Test(t, func(t *testing.T) {
		r = runVirtual(t, "run", "--case", "gone", "--headless", "--out", out)
	})
	if r.code != exitcode.Failed {
		t.Fatalf("exit %d, want %d (a bound failed)\nstdout:\n%s\nstderr:\n%s", r.code, exitcode.Failed, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "case gone: --source-dp 2 --mode pd") {
		t.Errorf("stderr does not say what the case set:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "faulted_max: a request naming the faulted source took 40.") {
		t.Errorf("faulted_max did not fail at 40 s:\n%s", r.stdout)
	}
	rows := reportRows(t, out)
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	var rank0, rank1 []report.WhyRow
	var sibling bool
	for _, w := range rows[0].Why {
		if w.Rank == nil {
			t.Fatalf("why line %+v: want the source's pulls by rank", w)
		}
		if w.Sent == report.WhyIn && w.Cause == event.CauseAbortAck {
			// Legs sent in the window on a session not yet reaped: rank
			// 1's only (rank 0's ended on the reset).
			if *w.Rank == 0 || w.P50 < 40 || w.Max > 40.5 {
				t.Errorf("why, sent in the window: %s waited the load timeout and the abort-ack, p50 %.3f s, max %.3f s; want rank 1's only, 40-40.5 s", event.RankName(0, *w.Rank), w.P50, w.Max)
			}
			sibling = true
		}
		if w.Sent != report.WhyBefore {
			continue
		}
		if *w.Rank == 0 {
			rank0 = append(rank0, w)
		} else {
			rank1 = append(rank1, w)
		}
	}
	// Loads take 2.1 s at the preset's bandwidth and each rank gets a
	// trial a second: two in flight on each rank when the pod goes.
	n := func(ws []report.WhyRow) (n int) {
		for _, w := range ws {
			n += w.N
		}
		return n
	}
	if n(rank0) < 1 || n(rank1) < 1 {
		t.Fatalf("loads caught in flight: rank 0 %d, rank 1 %d; want some on each\n%s", n(rank0), n(rank1), r.stdout)
	}
	for _, w := range rank0 {
		if w.Cause != event.CausePeerDown {
			t.Errorf("rank 0, caught in flight: %s; want peer_down", w.Cause)
		}
	}
	// "At once": each of rank 0's loads caught in flight ended within a
	// second of the fault, read from the run's own samples.
	run, err := report.FromEvents(eventsOf(t, filepath.Join(out, report.FileEvents)))
	if err != nil || len(run.Windows) != 1 {
		t.Fatalf("%d windows, %v", len(run.Windows), err)
	}
	at := run.Windows[0].Start
	for _, s := range run.Samples {
		if s.Source == 0 && s.Rank == 0 && s.Start < at && s.Start+s.Latency > at {
			if late := s.Start + s.Latency - at; late > time.Second {
				t.Errorf("rank 0's load sent %v before the fault ended %v after it; want at once", at-s.Start, late)
			}
		}
	}
	if !sibling {
		t.Errorf("why: no line of rank 1's legs sent in the window waited the load timeout and the abort-ack")
	}
	for _, w := range rank1 {
		if w.Cause != event.CauseAbortAck || w.P50 < 40 || w.Max > 40.5 {
			t.Errorf("rank 1, caught in flight: %s, p50 %.3f s, max %.3f s; want abort_ack, the load timeout and the abort-ack, 40-40.5 s (#56828: 36-43 s)", w.Cause, w.P50, w.Max)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", r.stdout)
	}
}
