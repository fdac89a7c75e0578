package runfolder

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"p2pfault/event"
)

// TestNamesCarryTheModeOutsideP2P: a row's folder, a several-arm run's
// arm folder and a default run folder name the mode outside p2p, and the
// arm's name is made safe for a file name in every one of them.
func TestNamesCarryTheModeOutsideP2P(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{RowName("main", "", "stall"), "main-stall"},
		{RowName("main", event.ModeP2P, "stall"), "main-stall"},
		{RowName("fixed", event.ModePD, "kill"), "fixed-pd-kill"},
		{RowName("+ #64501", event.ModePD, "kill"), "+__64501-pd-kill"},
		{RowName("a/b", "", "stall"), "a_b-stall"},
		{RowOf("/x", event.RunInfo{Arm: "fixed", Mode: event.ModePD, Case: "stall"}), "/x/fixed-pd-stall"},
		{RowLabel("main", event.ModePD, "stall"), "main/pd/stall"},
		{RowLabel("main", event.ModeP2P, "stall"), "main/stall"},
		{RunName([]string{"main", "fixed"}, event.ModePD, "none"), "main+fixed-pd-none"},
		{Default("slice", time.Date(2026, 12, 1, 15, 53, 0, 0, time.UTC)), "p2pfault-runs/20261201-155300-slice"},
		{EventsFile("/x", false), "/x/events.jsonl"},
		{EventsFile("/x", true), "/x/events.jsonl.zst"},
		{Log("/x", "source-0"), "/x/source-0.log"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// TestFindTurnsAnArgumentIntoAnEventsFile: a file is itself; a run
// folder gives events.jsonl, or events.jsonl.zst when only that is there;
// a slice's folder names its rows; an empty folder and a missing path are
// errors of their own.
func TestFindTurnsAnArgumentIntoAnEventsFile(t *testing.T) {
	dir := t.TempDir()
	touch := func(parts ...string) string {
		p := filepath.Join(append([]string{dir}, parts...)...)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := touch("run", Events)
	touch("run", EventsZstd) // the plain one wins when both are there
	zst := touch("zrun", EventsZstd)
	touch("slice", "main-stall", Events)
	touch("slice", "main-stall", EventsZstd)
	touch("slice", "fixed-pd-kill", EventsZstd)
	touch("slice", "main-stall", Sessions)
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ arg, want string }{
		{plain, plain}, {filepath.Join(dir, "run"), plain}, {filepath.Join(dir, "zrun"), zst}, {zst, zst},
	} {
		if got, err := Find(tt.arg); err != nil || got != tt.want {
			t.Errorf("Find(%s) = %q, %v; want %q", tt.arg, got, err, tt.want)
		}
	}
	_, err := Find(filepath.Join(dir, "slice"))
	var rows *RowsError
	if !errors.As(err, &rows) {
		t.Fatalf("Find(a slice's folder) = %v, want a RowsError", err)
	}
	if want := []string{filepath.Join(dir, "slice", "fixed-pd-kill"), filepath.Join(dir, "slice", "main-stall")}; !reflect.DeepEqual(rows.Rows, want) {
		t.Errorf("rows %q, want %q (each once)", rows.Rows, want)
	}
	var none *NoEventsError
	if _, err := Find(filepath.Join(dir, "empty")); !errors.As(err, &none) {
		t.Errorf("Find(an empty folder) = %v, want a NoEventsError", err)
	}
	if _, err := Find(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Find(a missing path) = %v, want not-exist", err)
	}
	if got, want := Holding(filepath.Join(dir, "slice"), Sessions), []string{filepath.Join(dir, "slice", "main-stall")}; !reflect.DeepEqual(got, want) {
		t.Errorf("Holding(slice, sessions) = %q, want %q", got, want)
	}
	if got, want := Holding(filepath.Join(dir, "run"), Events), []string{filepath.Join(dir, "run")}; !reflect.DeepEqual(got, want) {
		t.Errorf("Holding(run, events) = %q, want %q", got, want)
	}
}
