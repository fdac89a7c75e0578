package attach

import (
	"fmt"
	"strconv"
	"strings"

	"p2pfault/fault"
)

// ResumeCommand is the resume argv of the source a stall record names
// ("pod-a", or "pod-a/rank1" for a stall of one rank), filled in from this
// file: what `p2pfault cleanup DIR --attach FILE` runs for a stall a dead
// p2pfault left, instead of any command the record holds (a record is
// data, and anyone who could write it would choose what cleanup runs).
func (f *File) ResumeCommand(stall string) ([]string, error) {
	name, g, err := splitStall(stall)
	if err != nil {
		return nil, err
	}
	for i := range f.Sources {
		s := &f.Sources[i]
		if s.Name != name {
			continue
		}
		argv, ok := s.Faults.Commands[fault.ActionResume]
		if s.Faults.Local || !ok {
			return nil, fmt.Errorf("%s has no resume command in %s (line %d): resume it by hand", name, f.Path, s.Line)
		}
		return s.Fill(argv, g), nil
	}
	return nil, fmt.Errorf("%s names no source %s: give the attach file the run used", f.Path, name)
}

// splitStall parses a stall's name: a source's name (nameRE: no '/'), then
// "/rankN" for one rank's stall (rankName).
func splitStall(stall string) (string, fault.Grain, error) {
	name, rank, onRank := strings.Cut(stall, "/rank")
	if !onRank {
		return stall, fault.Grain{}, nil
	}
	r, err := strconv.Atoi(rank)
	if err != nil || r < 0 {
		return "", fault.Grain{}, fmt.Errorf("stall %q: not a source's name or NAME/rankN", stall)
	}
	return name, fault.Grain{OnRank: true, Rank: r}, nil
}
