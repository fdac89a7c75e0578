package report

import (
	"strings"
	"testing"

	"p2pfault/event"
)

// TestSteadyCaptionFollowsTheRows: the caption says "all of them" only for
// rows without a fault window; a row whose fault was fired by key (no
// timeline) has a window like a scripted one and gets the fault's words.
func TestSteadyCaptionFollowsTheRows(t *testing.T) {
	steady := []SteadyRow{{Source: 0, N: 10}}
	keyed := Row{Arm: "main", Case: "none", Steady: steady, Times: &event.Times{}}
	soak := Row{Arm: "main", Case: "none", Steady: steady}
	if c := steadyCaption([]Row{keyed}); strings.Contains(c, "all of them") || !strings.Contains(c, "outside the recovery window") {
		t.Errorf("keyed fault row: caption %q", c)
	}
	if c := steadyCaption([]Row{soak}); !strings.Contains(c, "all of them (no fault window opened)") {
		t.Errorf("soak row: caption %q", c)
	}
	if c := steadyCaption([]Row{keyed, soak}); !strings.Contains(c, "for a row without a fault window, all of them") {
		t.Errorf("mixed rows: caption %q", c)
	}
}
