package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/cli"
	"p2pfault/event"
)

// twoArmStream is one stall run of two arms in one event stream, written
// by hand and interleaved as two clusters running at once would write it:
// main's pulls naming the stalled source hang for the whole stall (30 s),
// fixed's come back at once. Neither has a final verdict, so `report`
// judges both from their samples.
func twoArmStream(t0 time.Time) []event.Event {
	var evs []event.Event
	seq := int64(0)
	add := func(arm string, at time.Duration, ev event.Event) {
		seq++
		ev.Seq, ev.Arm, ev.T, ev.Wall = seq, arm, at, t0.Add(at)
		evs = append(evs, ev)
	}
	arms := []string{"main", "fixed"}
	for _, arm := range arms {
		add(arm, 0, event.Event{Kind: event.KindRun, Run: &event.RunInfo{
			Arm: arm, Case: "stall", Engine: "sim", TimeScale: 1, Sources: 2,
			Interval: 500 * time.Millisecond, FaultAt: 10 * time.Second, FaultFor: 30 * time.Second,
			Duration: 65 * time.Second, Timeline: "at 10s stall source-0 for 30s",
			Bounds: check.DefaultBounds(), Model: "m", Started: t0,
		}})
	}
	for _, arm := range arms {
		add(arm, 10*time.Second, event.Event{Kind: event.KindWindow, Window: &event.Window{Source: 0, Start: 10 * time.Second, Recovers: true}})
	}
	for i, arm := range arms {
		var samples []event.Sample
		for k := range 120 { // a pull per source every 0.5 s, 0 s to 60 s
			start := time.Duration(k) * 500 * time.Millisecond
			for src := range 2 {
				s := event.Sample{Source: src, Trial: int64(2*k + src), Start: start, Latency: 20 * time.Millisecond,
					Status: 200, PromptTokens: 64, CachedTokens: 48}
				if src == 0 && start >= 10*time.Second && start < 40*time.Second {
					if arm == "main" {
						s.Latency = 40*time.Second - start // hangs until SIGCONT
					} else {
						s.CachedTokens = 0 // prefilled locally at once
					}
				}
				samples = append(samples, s)
			}
		}
		add(arm, 40*time.Second+time.Duration(i)*time.Millisecond, event.Event{Kind: event.KindWindow,
			Window: &event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true}})
		add(arm, 61*time.Second, event.Event{Kind: event.KindSamples, Samples: samples})
	}
	for _, arm := range arms {
		add(arm, 65*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseDone})
		add(arm, 66*time.Second, event.Event{Kind: event.KindEnd, Message: "run complete"})
	}
	return evs
}

// TestReportRebuildsOneRowPerArm: a stream that carries two arms rebuilds
// to two rows, each judged on its own events.
func TestReportRebuildsOneRowPerArm(t *testing.T) {
	dir := t.TempDir()
	var b bytes.Buffer
	for _, ev := range twoArmStream(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		line, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	path := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"report", path}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("report exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	var rows, times []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 2 && f[1] == "stall" && (f[2] == "pass" || f[2] == "FAIL"):
			rows = append(rows, f[0]+" "+f[2])
		case len(f) == 4 && f[1] == "stall":
			times = append(times, strings.Join([]string{f[0], f[2], f[3]}, " "))
		}
	}
	t.Logf("p2pfault report:\n%s", stdout.String())
	if got, want := strings.Join(rows, ", "), "main FAIL, fixed pass"; got != want {
		t.Errorf("rows %q, want %q\n%s", got, want, stdout.String())
	}
	// The second table: each arm's detect_s and recover_s. Main's pulls
	// hang until SIGCONT at 40 s, so from the one sent at 38 s on they
	// come back within 2 s; fixed's prefill from the fault on; both hit
	// from the first pull after the window.
	if got, want := strings.Join(times, ", "), "main 28.00s 0.00s, fixed 0.00s 0.00s"; got != want {
		t.Errorf("times rows %q, want %q\n%s", got, want, stdout.String())
	}
	doc, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Rows []struct {
			Arm    string `json:"arm"`
			Passed bool   `json:"passed"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(doc, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Arm != "main" || rep.Rows[0].Passed || rep.Rows[1].Arm != "fixed" || !rep.Rows[1].Passed {
		t.Errorf("report.json rows %+v, want main failed and fixed passed", rep.Rows)
	}
	for _, f := range []string{"timeline-main-stall.svg", "timeline-fixed-stall.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("no %s: %v", f, err)
		}
	}
}
