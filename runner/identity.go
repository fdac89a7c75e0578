package runner

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"p2pfault/runner/session"
	"p2pfault/safefile"
)

// Cmdlines are the command lines (/proc/PID/cmdline) of a record's
// processes by pid, read when they were recorded. A pid and a start time
// tell a process apart from one that reuses its pid; the command line
// tells a recorded engine apart from any other process a record might
// name (a record is data, and cleanup signals only what /proc shows is
// still the process recorded).
type Cmdlines map[int][]string

// ReadCmdlines reads the command line of each pid now; a process that is
// gone is left out.
func ReadCmdlines(pids ...int) Cmdlines {
	out := Cmdlines{}
	for _, pid := range pids {
		if argv, err := session.Cmdline(pid); err == nil && len(argv) > 0 {
			out[pid] = argv
		}
	}
	return out
}

// with returns c and the command lines of more, in a new map (a record
// being written may hold c).
func (c Cmdlines) with(more Cmdlines) Cmdlines {
	out := make(Cmdlines, len(c)+len(more))
	for pid, argv := range c {
		out[pid] = argv
	}
	for pid, argv := range more {
		out[pid] = argv
	}
	return out
}

// Still returns those of ids that are still the processes a record names:
// live, with the recorded start time, in session sid and with the recorded
// command line. A process that has the pid, start time and session but
// another command line, or no recorded one to compare, is not taken: why
// says so ("pid 123 is `sleep 1000`, not the recorded `...`"), so that the
// caller leaves it alone and says why. No id left and why empty: what the
// record names is gone.
func Still(sid int, ids []ProcID, recorded Cmdlines) (same []ProcID, why string) {
	var refused []string
	for _, id := range ids {
		st, err := session.Stat(id.Pid)
		if err != nil || !st.Live() || st.StartTicks != id.StartTicks || st.Sid != sid {
			continue
		}
		now, _ := session.Cmdline(id.Pid)
		want, ok := recorded[id.Pid]
		switch {
		case !ok:
			refused = append(refused, fmt.Sprintf("pid %d (%s) has no command line in the record to check it by", id.Pid, quoteArgv(now)))
		case !slices.Equal(now, want):
			refused = append(refused, fmt.Sprintf("pid %d is %s, not the recorded %s", id.Pid, quoteArgv(now), quoteArgv(want)))
		default:
			same = append(same, id)
		}
	}
	if len(same) > 0 {
		return same, ""
	}
	return nil, strings.Join(refused, "; ")
}

// recordError is err from reading a record of kind: a refused one as it
// is (it names the file and why), others said to be the record's.
func recordError(kind string, err error) error {
	var te *safefile.TrustError
	if errors.As(err, &te) {
		return err
	}
	return fmt.Errorf("read %s record: %w", kind, err)
}

// quoteArgv shows a command line in a message: `argv joined`, cut short.
func quoteArgv(argv []string) string {
	if len(argv) == 0 {
		return "`` (no command line)"
	}
	s := strings.Join(argv, " ")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return "`" + s + "`"
}

// pidsOf is the pids of ids.
func pidsOf(ids []ProcID) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = id.Pid
	}
	return out
}
