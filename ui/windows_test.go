package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// The fault by fault panel heads a window's marks as the report's
// per-window table heads its columns (check.WindowColumns: all_200,
// faulted_max, ... took_effect), a mark per check in that order, and the
// line with its times fits whole in 160 columns.
func TestWindowsPanelHeadsItsMarksAsTheReportsColumns(t *testing.T) {
	styles := NewStyles(asciiRenderer())
	detect, recover := 1.25, 3.5
	var checks []event.Result
	for _, c := range check.WindowColumns {
		checks = append(checks, event.Result{Name: c.Name, Passed: c.Name != check.NameFaultedBound})
	}
	win := func(i int) event.WindowVerdict {
		return event.WindowVerdict{Index: i, Kind: "stall", Start: time.Duration(i) * 40 * time.Second, End: time.Duration(i)*40*time.Second + 5*time.Second,
			Checks: checks, Times: event.Times{DetectS: &detect, RecoverS: &recover}}
	}
	p := windowsPanel{windows: []event.WindowVerdict{win(1), win(2)}, styles: &styles}
	lines := strings.Split(p.Render(160, 3), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	line := lines[1]
	at := 0
	for _, c := range check.WindowColumns {
		mark := "✓ "
		if c.Name == check.NameFaultedBound {
			mark = "✗ "
		}
		i := strings.Index(line[at:], " "+mark+c.Head+" ")
		if i < 0 {
			t.Fatalf("window line lacks %q after column %d (the report's head of %s):\n%s", mark+c.Head, at, c.Name, line)
		}
		at += i + 1
	}
	if !strings.Contains(line[at:], "detect 1.25s  recover 3.50s") {
		t.Errorf("window line cut before its times at 160 columns:\n%s", line)
	}
}
