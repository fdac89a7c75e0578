package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

func TestTTFTRowsOfAStreamedRun(t *testing.T) {
	s := func(src int, start, ttft time.Duration) event.Sample {
		return event.Sample{Source: src, Start: start, TTFT: ttft, Latency: ttft + time.Millisecond, Status: 200}
	}
	r := Run{
		HasWindow: true,
		Window:    event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second},
		Samples: []event.Sample{
			s(0, time.Second, 20*time.Millisecond), s(0, 12*time.Second, 18*time.Second), s(0, 20*time.Second, 10*time.Second),
			s(0, 30*time.Second, 2*time.Second), s(1, 12*time.Second, 30*time.Millisecond),
			{Source: 1, Start: 13 * time.Second, Status: 0}, // no token: not counted
		},
	}
	rows := ttftRows(r)
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	if g := rows[0]; g.Source != 0 || g.N != 4 || g.Max != 18 || g.WindowN != 3 || g.WindowP50 != 10 || g.WindowMax != 18 {
		t.Errorf("faulted source %+v", g)
	}
	if g := rows[1]; g.Source != 1 || g.N != 1 || g.WindowN != 1 || g.P50 != 0.03 {
		t.Errorf("healthy source %+v", g)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, Row{Arm: "main", Case: "stall", Passed: true, TTFT: rows}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 0 | 4 | 6.00 s | 18.00 s | 3 | 10.00 s | 18.00 s |") {
		t.Errorf("report.md:\n%s", md.String())
	}
	b, _ := json.Marshal(Row{TTFT: rows})
	if !strings.Contains(string(b), `"ttft":[{"source":0,"n":4,`) {
		t.Errorf("row JSON %s", b)
	}

	t.Run("a run not streamed has no TTFT", func(t *testing.T) {
		r.Samples = []event.Sample{{Source: 0, Latency: time.Second, Status: 200}}
		if rows := ttftRows(r); rows != nil {
			t.Errorf("rows %+v", rows)
		}
		b, _ := json.Marshal(Row{TTFT: ttftRows(r)})
		if strings.Contains(string(b), "ttft") {
			t.Errorf("row JSON %s", b)
		}
	})
}
