package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/report"
	"p2pfault/runfolder"
	"p2pfault/ui"
)

func newReplayCommand() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "replay DIR|DIR/events.jsonl[.zst]",
		Short: "Play a run's events in the dashboard again, on the run's own clock",
		Long: "Open the dashboard on a finished, crashed or still-running run's events and play\n" +
			"them at the pace they were written: every panel shows what it showed live at that\n" +
			"moment. space pauses, ←/→ step 1 s (shift: 10 s), [ and ] halve and double the\n" +
			"speed (×0.25 to ×64), f/F jump to the next/previous fault window, g/G to the start\n" +
			"and the end. A file cut short by a crash plays as far as it goes. With --follow it\n" +
			"starts at the end of a run that is still writing and keeps reading what it adds.\n" +
			"events.jsonl.zst (run --events-compress zstd) is read and followed as events.jsonl is.",
		Args: oneArg("replay", "run folder or events.jsonl"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := eventsArg("replay", args[0])
			if err != nil {
				return err
			}
			cfg, closeFile, err := openReplay(path, follow)
			if err != nil {
				return err
			}
			defer closeFile()
			if !isTerminal(cmd.OutOrStdout()) {
				return exitcode.Usagef("replay %s: the replay is a dashboard and stdout is not a terminal (`p2pfault report %s` prints the run's tables)", path, path)
			}
			return ui.RunReplay(cmd.Context(), cfg, ui.Options{})
		},
	}
	cmd.Flags().BoolVar(&follow, "follow", false, "start at the end of a run that is still writing and keep reading the events it adds")
	return cmd
}

// oneArg is the Args of a command that takes exactly one argument, what:
// any other count is a usage error, "VERB: want one WHAT, got N arguments".
func oneArg(verb, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return exitcode.Usagef("%s: want one %s, got %d arguments", verb, what, len(args))
		}
		return nil
	}
}

// eventsArg is the events file the argument of `p2pfault VERB` (report,
// replay) names, as runfolder.Find finds it; what it cannot find is a
// usage error naming the argument. A slice's folder holds no events of its
// own, one run per row: the error lists the commands for its rows.
func eventsArg(verb, arg string) (string, error) {
	path, err := runfolder.Find(arg)
	var rows *runfolder.RowsError
	var none *runfolder.NoEventsError
	switch {
	case err == nil:
		return path, nil
	case errors.As(err, &rows):
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s; %s a row:", verb, rows, verb)
		for _, r := range rows.Rows {
			fmt.Fprintf(&b, "\n  p2pfault %s %s", verb, r)
		}
		return "", exitcode.Usagef("%s", b.String())
	case errors.As(err, &none):
		return "", exitcode.Usagef("%s %s", verb, none)
	}
	return "", exitcode.Usagef("%s: %w", verb, err)
}

// openReplay reads path's events with report's reader (a file cut short
// by a crash reads as far as it goes) and, to follow it, keeps reading what
// is written after them.
func openReplay(path string, follow bool) (ui.ReplayConfig, func(), error) {
	cfg := ui.ReplayConfig{Name: path}
	f, err := os.Open(path)
	if err != nil {
		return cfg, nil, exitcode.Usagef("replay: %w", err)
	}
	evs, truncated, err := report.ReadEvents(f)
	f.Close()
	if err != nil {
		return cfg, nil, exitcode.Usagef("replay %s: not an events file: %w", path, err)
	}
	if len(evs) == 0 && truncated {
		// One line that does not parse reads as a crash's cut line; with
		// nothing before it, it is no events file at all (or, followed, a
		// first line still being written).
		if why := firstLineError(path); why != nil && !follow {
			return cfg, nil, exitcode.Usagef("replay %s: not an events file: line 1: %w", path, why)
		}
	}
	if err := checkReplayEvents(path, evs, follow); err != nil {
		return cfg, nil, err
	}
	cfg.Events, cfg.Truncated = evs, truncated && !follow
	cfg.LogTail = replayLogs{dir: filepath.Dir(path), rows: armFolders(filepath.Dir(path), evs)}.tail
	if !follow {
		return cfg, func() {}, nil
	}
	tail, err := report.OpenTail(path, len(evs))
	if err != nil {
		return cfg, nil, exitcode.AsUsage(fmt.Errorf("replay: %w", err))
	}
	cfg.Follow, cfg.FromEnd = tail.Next, true
	return cfg, func() { _ = tail.Close() }, nil
}

// checkReplayEvents refuses what JSON lines can hold but a run does not
// write: an event without a kind, or a stream without its run event. A
// followed file may not have its first line yet.
func checkReplayEvents(path string, evs []event.Event, follow bool) error {
	if len(evs) == 0 {
		if follow {
			return nil
		}
		return exitcode.Usagef("replay %s: not an events file: it holds no events", path)
	}
	sawRun := false
	for i, ev := range evs {
		if ev.Kind == "" {
			return exitcode.Usagef("replay %s: not an events file: event %d has no kind", path, i+1)
		}
		sawRun = sawRun || ev.Kind == event.KindRun
	}
	if !sawRun {
		return exitcode.Usagef("replay %s: not an events file of a run: none of its %d events is a %q event", path, len(evs), event.KindRun)
	}
	return nil
}

// armFolders maps each arm of a several-arm run to its folder
// (runfolder.RowOf: DIR/ARM-CASE, or DIR/ARM-MODE-CASE outside mode p2p,
// where its engines' logs are); a one-arm run's logs are in dir itself.
func armFolders(dir string, evs []event.Event) map[string]string {
	out := map[string]string{}
	for _, ev := range evs {
		if ev.Kind != event.KindRun || ev.Run == nil {
			continue
		}
		d := runfolder.RowOf(dir, *ev.Run)
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out[ev.Run.Arm] = d
		}
	}
	return out
}

// replayLogs reads a replayed run's engine logs as they stood at an instant.
type replayLogs struct {
	dir  string
	rows map[string]string // arm → folder, several arms
}

// logStamp is the time vLLM's logger (and the simulated engine's) puts
// on a line: "INFO 12-01 15:28:51 [api_server] ...", after an optional
// "(APIServer pid=42) ". It is local time to the second, with no year.
var logStamp = regexp.MustCompile(`^(?:\([^)]*\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d) `)

// tail is an engine's last n log lines written by at: the lines up to the
// first stamped after at (a line without a stamp goes with the one before).
// engine is "ARM/ENGINE" with several arms.
func (l replayLogs) tail(engine string, n int, at time.Time) []string {
	dir := l.dir
	if arm, name, ok := strings.Cut(engine, "/"); ok {
		if d, found := l.rows[arm]; found {
			dir = d
		}
		engine = name
	}
	path := runfolder.Log(dir, engine)
	f, err := os.Open(path)
	if err != nil {
		return []string{fmt.Sprintf("replay: no log of %s: %v", engine, err)}
	}
	defer f.Close()
	local := at.In(time.Local)
	limit := local.Truncate(time.Second)
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := logStamp.FindStringSubmatch(line); m != nil {
			ts, err := time.ParseInLocation("2006 01-02 15:04:05", fmt.Sprintf("%d %s", local.Year(), m[1]), time.Local)
			if err == nil && ts.After(limit) {
				break
			}
		}
		lines = append(lines, line)
		if len(lines) > 2*n {
			lines = append(lines[:0], lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// firstLineError is why path's first line is not an event, nil if it is
// one (or the file is empty).
func firstLineError(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	var ev event.Event
	if err := json.Unmarshal(bytes.TrimSpace(line), &ev); err != nil {
		return err
	}
	return nil
}
