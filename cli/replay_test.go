package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"p2pfault/cli"
	"p2pfault/event"
	"p2pfault/report"
)

// writeRun writes a small run's events.jsonl in dir.
func writeRun(t *testing.T, dir string) string {
	t.Helper()
	return writeRunWith(t, dir, report.CompressNone)
}

// writeRunWith writes it plain or compressed (events.jsonl.zst).
func writeRunWith(t *testing.T, dir string, c report.Compression) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := c.Path(dir)
	log, err := report.NewEventLogWith(path, c)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i, ev := range []event.Event{
		{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Case: "stall", Sources: 2, TimeScale: 1}},
		{Kind: event.KindPhase, Phase: event.PhaseStarting},
		{Kind: event.KindEnd, Message: "run complete"},
	} {
		ev.Seq, ev.Wall, ev.Arm = int64(i+1), wall.Add(time.Duration(i)*time.Second), "main"
		if err := log.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReplayBadInputIsAUsageErrorThatNamesIt: what replay cannot play
// ends with exit 2 and a message naming the file or folder and why.
func TestReplayBadInputIsAUsageErrorThatNamesIt(t *testing.T) {
	dir := t.TempDir()
	run := writeRun(t, filepath.Join(dir, "run"))
	zrun := writeRunWith(t, filepath.Join(dir, "zrun"), report.CompressZstd)
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	report := write("report.json", "{\n  \"rows\": []\n}\n")
	text := write("notes.txt", "the stall row failed again\n")
	empty := write("empty.jsonl", "")
	kindless := write("kindless.jsonl", "{\"seq\":1}\n{\"seq\":2}\n")
	norun := write("norun.jsonl", "{\"seq\":1,\"kind\":\"phase\",\"phase\":\"starting\"}\n")
	noEvents := filepath.Join(dir, "no-events")
	if err := os.MkdirAll(noEvents, 0o755); err != nil {
		t.Fatal(err)
	}
	slice := filepath.Join(dir, "slice")
	writeRun(t, filepath.Join(slice, "main-stall"))
	writeRun(t, filepath.Join(slice, "fixed-stall"))

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no argument", []string{"replay"}, []string{"replay: want one run folder or events.jsonl, got 0 arguments"}},
		{"a missing file", []string{"replay", filepath.Join(dir, "nope.jsonl")}, []string{"replay: stat " + filepath.Join(dir, "nope.jsonl") + ": no such file or directory"}},
		{"a JSON file that is not events", []string{"replay", report}, []string{"replay " + report + ": not an events file: events line 1"}},
		{"a text file", []string{"replay", text}, []string{"replay " + text + ": not an events file: line 1: invalid character"}},
		{"an empty file", []string{"replay", empty}, []string{"replay " + empty + ": not an events file: it holds no events"}},
		{"JSON lines without a kind", []string{"replay", kindless}, []string{"replay " + kindless + ": not an events file: event 1 has no kind"}},
		{"events without a run", []string{"replay", norun}, []string{"replay " + norun + `: not an events file of a run: none of its 1 events is a "run" event`}},
		{"a folder without events.jsonl", []string{"replay", noEvents}, []string{"replay " + noEvents + ": no events.jsonl or events.jsonl.zst in this folder"}},
		{"a slice's folder lists its rows", []string{"replay", slice}, []string{
			"replay " + slice + ": a slice's folder has no events.jsonl of its own, one run per row; replay a row:",
			"p2pfault replay " + filepath.Join(slice, "fixed-stall"),
			"p2pfault replay " + filepath.Join(slice, "main-stall"),
		}},
		{"a good file, but stdout is no terminal", []string{"replay", run}, []string{"replay " + run + ": the replay is a dashboard and stdout is not a terminal"}},
		{"a good folder, followed, stdout no terminal", []string{"replay", "--follow", filepath.Dir(run)}, []string{"replay " + run + ": the replay is a dashboard"}},
		// A folder with only events.jsonl.zst replays it, read (and
		// followed) by report's reader: it gets as far as the terminal.
		{"a zstd run's folder, stdout no terminal", []string{"replay", filepath.Dir(zrun)}, []string{"replay " + zrun + ": the replay is a dashboard"}},
		{"a zstd run's folder, followed", []string{"replay", "--follow", filepath.Dir(zrun)}, []string{"replay " + zrun + ": the replay is a dashboard"}},
		{"a bad flag", []string{"replay", "--speed", "2", run}, []string{"unknown flag: --speed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli.Main(tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q does not say %q", stderr.String(), w)
				}
			}
		})
	}
}
