package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// TestReplayLogsStandAsTheyDidAtTheInstant: the full-screen log of a
// replay shows an engine's log up to the replay's position, by the stamps
// vLLM's logger (and the sim's) puts on each line; an unstamped line goes
// with the one before; several arms' logs are in their rows' folders.
func TestReplayLogsStandAsTheyDidAtTheInstant(t *testing.T) {
	dir := t.TempDir()
	at := func(s string) time.Time {
		ts, err := time.ParseInLocation("2006-01-02 15:04:05.000", "2026-12-01 "+s, time.Local)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	log := strings.Join([]string{
		"==> p2pfault: source-0 started, pid 42, session 42: sim serve ...",
		"INFO 12-01 12:00:00 [api_server] started engine core (pid 43)",
		"INFO 12-01 12:00:01 [p2p] P2P tier listening as 127.0.0.1:7777",
		"Traceback (most recent call last):",
		"(EngineCore_DP0 pid=43) WARNING 12-01 12:00:02 [p2p] peer down",
		"INFO 12-01 12:00:05 [loggers] Engine 000: Avg prompt throughput",
	}, "\n") + "\n"
	for _, d := range []string{dir, filepath.Join(dir, "fixed-stall")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		body := log
		if d != dir {
			body = strings.ReplaceAll(log, "source-0 started", "fixed's source-0 started")
		}
		if err := os.WriteFile(filepath.Join(d, "source-0.log"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	evs := []event.Event{
		{Kind: event.KindRun, Arm: "main", Run: &event.RunInfo{Arm: "main", Case: "stall"}},
		{Kind: event.KindRun, Arm: "fixed", Run: &event.RunInfo{Arm: "fixed", Case: "stall"}},
	}
	one := replayLogs{dir: dir}
	arms := replayLogs{dir: dir, rows: armFolders(dir, evs)}
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	tests := []struct {
		name   string
		logs   replayLogs
		engine string
		n      int
		at     time.Time
		want   []string
	}{
		{"before the first stamp: the launch line", one, "source-0", 10, at("11:59:59.000"), lines[:1]},
		{"within a second: its lines, and the unstamped one after", one, "source-0", 10, at("12:00:01.500"), lines[:4]},
		{"the process prefix of newer vLLM", one, "source-0", 10, at("12:00:02.000"), lines[:5]},
		{"the last n", one, "source-0", 2, at("12:00:09.000"), lines[4:]},
		{"another arm's row folder", arms, "fixed/source-0", 1, at("12:00:00.200"), lines[1:2]},
		{"another arm: its own file", arms, "fixed/source-0", 10, at("11:59:59.000"), []string{"==> p2pfault: fixed's source-0 started, pid 42, session 42: sim serve ..."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.logs.tail(tt.engine, tt.n, tt.at); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
	if got := one.tail("decoder", 10, at("12:00:00.000")); len(got) != 1 || !strings.Contains(got[0], "replay: no log of decoder") {
		t.Errorf("a missing log gave %q", got)
	}
}
