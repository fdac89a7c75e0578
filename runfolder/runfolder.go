// Package runfolder is the layout of a run's output folder, in one place
// for every command that writes or reads one (run, slice, report, replay,
// cleanup): the names of its files, the folders of a several-arm run's arms
// and of a slice's rows, and how a command-line argument names a run's
// events. It knows names and paths only; what the files hold belongs to
// the packages that write them (report, runner, attach/guard).
//
// A run's folder holds events.jsonl (or events.jsonl.zst), sessions.json,
// each engine's NAME.log, the reports, p2pfault.lock (the lock its run
// holds on it: one folder, one run, see Claim) and, for an attached run,
// stalls.json. A slice's folder, and a several-arm run's, holds one row
// folder per arm × mode × case (ARM-CASE, or ARM-MODE-CASE outside mode
// p2p) laid out the same way; the slice's folder has no events of its own,
// a several-arm run's has the merged stream beside its arms' folders.
package runfolder

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"p2pfault/event"
)

// File names in a run's folder.
const (
	Events     = "events.jsonl"  // the run's events, one JSON object a line
	EventsZstd = Events + ".zst" // the same, written with --events-compress zstd
	Sessions   = "sessions.json" // the engines' sessions, for cleanup (runner)
	Stalls     = "stalls.json"   // an attached run's stalls in force, for cleanup (attach/guard)
	// Annotations holds the run's fault windows with their verdicts in
	// Grafana's annotation format (report).
	Annotations = "annotations.json"
	Root        = "p2pfault-runs"   // the folder of runs whose --out was not given
	logSuffix   = ".log"            // an engine's log: NAME.log
	stampTime   = "20060102-150405" // a default folder's date and time
	rowSep      = "-"               // between a row folder's arm, mode and case
	labelSep    = "/"               // the same in progress lines and errors
	armsJoiner  = "+"               // between the arms in a default folder's name
)

// label names a row: ARM + sep + CASE in mode p2p (the seed's), with the
// mode between them otherwise. Folders use "-", progress lines "/".
func label(arm, mode, caseName, sep string) string {
	if mode == "" || mode == event.ModeP2P {
		return arm + sep + caseName
	}
	return arm + sep + mode + sep + caseName
}

// RowLabel is how progress lines and errors name a row: ARM/CASE or
// ARM/MODE/CASE.
func RowLabel(arm, mode, caseName string) string {
	return label(arm, mode, caseName, labelSep)
}

// RowName is the folder of one arm × mode × case inside a slice's or a
// several-arm run's folder: ARM-CASE, or ARM-MODE-CASE outside mode p2p,
// with the arm's name made safe for a file name.
func RowName(arm, mode, caseName string) string {
	return label(FileSafe(arm), mode, caseName, rowSep)
}

// Row is RowName's folder inside dir.
func Row(dir, arm, mode, caseName string) string {
	return filepath.Join(dir, RowName(arm, mode, caseName))
}

// RowOf is the folder inside dir of the run an events stream's run event
// describes (a several-arm run's arm, a slice's row, a swept one's value).
func RowOf(dir string, run event.RunInfo) string {
	return SweptRow(dir, run.Arm, run.Mode, run.Case, run.Settings)
}

// SweptRow is Row for a row of a slice's --sweep: ARM-CASE (or
// ARM-MODE-CASE) then -NAME_VALUE per setting, made safe for a file name
// (main-stall-VLLM_P2P_HANDSHAKE_TIMEOUT_S_10); Row itself without one.
func SweptRow(dir, arm, mode, caseName string, settings []event.Setting) string {
	row := Row(dir, arm, mode, caseName)
	if len(settings) > 0 {
		row += rowSep + FileSafe(event.SettingsText(settings, rowSep))
	}
	return row
}

// RunName names a run's default folder: its arms joined by '+', then its
// mode outside p2p, then its case (main+fixed-pd-stall).
func RunName(arms []string, mode, caseName string) string {
	return label(FileSafe(strings.Join(arms, armsJoiner)), mode, caseName, rowSep)
}

// Default is the folder under Root of a run started at now whose --out
// was not given: p2pfault-runs/DATE-TIME-NAME (NAME a RunName, or "slice").
func Default(name string, now time.Time) string {
	return Root + "/" + now.Format(stampTime) + "-" + name
}

// FileSafe replaces anything but letters, digits, '.', '_', '-' and '+'
// in s by '_': "+ #64501" is a fine arm name but not a fine folder name.
func FileSafe(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-', c == '+':
			return c
		}
		return '_'
	}, s)
}

// EventsFile is the events file a run writes in dir: events.jsonl, or
// events.jsonl.zst when it writes them compressed.
func EventsFile(dir string, zstd bool) string {
	if zstd {
		return filepath.Join(dir, EventsZstd)
	}
	return filepath.Join(dir, Events)
}

// EventsIn is the events file of the run folder dir: events.jsonl, or
// events.jsonl.zst when only that one is there.
func EventsIn(dir string) string {
	plain := filepath.Join(dir, Events)
	if _, err := os.Stat(plain); err != nil {
		if z := filepath.Join(dir, EventsZstd); exists(z) {
			return z
		}
	}
	return plain
}

// Log is the log file of the engine named engine in the run folder dir.
func Log(dir, engine string) string { return filepath.Join(dir, engine+logSuffix) }

// Holding returns dir if it holds the file name, then the row folders in
// dir that do (a slice's rows, a several-arm run's arms), each in order.
func Holding(dir, name string) []string {
	var dirs []string
	for _, pattern := range []string{name, filepath.Join("*", name)} {
		found, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range found {
			dirs = append(dirs, filepath.Dir(f))
		}
	}
	return dirs
}

// Runs lists the folders under ./p2pfault-runs: the runs whose --out was
// not given.
func Runs() []string {
	found, _ := filepath.Glob(filepath.Join(Root, "*"))
	return found
}

// RowsError says a folder has no events of its own but row folders that
// do: a slice's folder. Rows are the row folders, in order.
type RowsError struct {
	Dir  string
	Rows []string
}

func (e *RowsError) Error() string {
	return fmt.Sprintf("%s: a slice's folder has no %s of its own, one run per row", e.Dir, Events)
}

// NoEventsError says a folder holds no events file, in itself or in rows.
type NoEventsError struct{ Dir string }

func (e *NoEventsError) Error() string {
	return fmt.Sprintf("%s: no %s or %s in this folder (give a run's output folder or its events file)", e.Dir, Events, EventsZstd)
}

// Find is the events file a command-line argument names: the file itself,
// or a run folder's (EventsIn). A folder without one is a *RowsError when
// its rows have theirs (a slice's), else a *NoEventsError; an argument
// that cannot be read is os.Stat's error.
func Find(arg string) (string, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return arg, nil
	}
	path := EventsIn(arg)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	rows := append(Holding(arg, Events), Holding(arg, EventsZstd)...)
	if len(rows) == 0 {
		return "", &NoEventsError{Dir: arg}
	}
	sort.Strings(rows)
	return "", &RowsError{Dir: arg, Rows: slices.Compact(rows)} // a row may hold both files
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }
