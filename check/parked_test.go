package check

import (
	"strings"
	"testing"
	"time"
)

// TestParkedChecks: a source whose parked stores come back to their level
// before the fault within the bound passes; one that comes back only after
// it, or never, fails, saying so; a run that ended before the bound is not
// seen (empty); engines that export nothing get no line; a removed
// decoder (no end) is judged from its start.
func TestParkedChecks(t *testing.T) {
	s := time.Second
	series := func(vals ...float64) []ParkedPoint { // one reading a second from 0 s
		var pts []ParkedPoint
		for i, v := range vals {
			pts = append(pts, ParkedPoint{At: time.Duration(i) * s, Stores: v, Blocks: 3 * v})
		}
		return pts
	}
	kill := DecoderWindow{Decoder: 1, Kind: "kill", Start: 2 * s, End: 4 * s, Recovers: true}
	for _, tt := range []struct {
		name       string
		pts        []ParkedPoint
		w          DecoderWindow
		runEnd     time.Duration
		pass, empt bool
		want       string
	}{
		{"back in time", series(1, 1, 5, 9, 9, 9, 1, 0), kill, 8 * s, true, false, "baseline 1 stores (3 blocks), peak 9 (27), back after 2.0s"},
		{"back late", series(0, 0, 5, 9, 9, 9, 9, 9, 0), kill, 9 * s, false, false, "back only after 4.0s"},
		{"never back", series(0, 0, 5, 9, 9, 9, 9, 9, 9), kill, 9 * s, false, false, "still 9 stores (27 blocks) parked 4.0s after"},
		{"run too short", series(0, 0, 5, 9, 9), kill, 5 * s, false, true, "before the bound"},
		{"removed: from its start", series(0, 0, 5, 0), DecoderWindow{Decoder: 1, Kind: "remove", Start: 2 * s}, 4 * s, true, false, "back after 1.0s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := ParkedChecks([]string{"source-0"}, map[string][]ParkedPoint{"source-0": tt.pts}, []DecoderWindow{tt.w}, 3*s, 10*s, tt.runEnd)
			if len(rs) != 1 {
				t.Fatalf("%d results, want 1: %+v", len(rs), rs)
			}
			r := rs[0]
			if r.Name != NameParkedStores || r.Passed != tt.pass || r.Empty != tt.empt || !strings.Contains(r.Detail, tt.want) {
				t.Errorf("got %+v\nwant passed %v, empty %v, detail with %q", r, tt.pass, tt.empt, tt.want)
			}
		})
	}
	if rs := ParkedChecks([]string{"source-0"}, nil, []DecoderWindow{kill}, 3*s, 10*s, 60*s); rs != nil {
		t.Errorf("no series exported gave %+v, want no line", rs)
	}
}

// TestParkedWindowSettlesOnceBack: a window whose source's stores were
// back is settled, and a later rise (another fault's stores) is not its
// peak, so its result is the same whichever later readings are kept; one
// not back yet, in time or not, is not settled.
func TestParkedWindowSettlesOnceBack(t *testing.T) {
	s := time.Second
	kill := DecoderWindow{Decoder: 1, Kind: "kill", Start: 2 * s, End: 4 * s, Recovers: true}
	pts := []ParkedPoint{{0, 1, 3}, {s, 1, 3}, {2 * s, 9, 27}, {5 * s, 1, 3}, {6 * s, 20, 60}}
	for _, tt := range []struct {
		name    string
		pts     []ParkedPoint
		settled bool
		want    string
	}{
		{"back, a later rise", pts, true, "peak 9 (27), back after 1.0s"},
		{"back, nothing later", pts[:4], true, "peak 9 (27), back after 1.0s"},
		{"not back yet", pts[:3], false, "before the bound"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, ok, settled := ParkedWindow([]string{"source-0"}, map[string][]ParkedPoint{"source-0": tt.pts}, kill, 3*s, 10*s, 6*s)
			if !ok || settled != tt.settled || !strings.Contains(r.Detail, tt.want) {
				t.Errorf("got %+v, ok %v, settled %v; want settled %v, detail with %q", r, ok, settled, tt.settled, tt.want)
			}
		})
	}
}
