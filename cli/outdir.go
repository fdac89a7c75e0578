package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"p2pfault/exitcode"
	"p2pfault/owner"
	"p2pfault/runfolder"
)

// claimOut takes a run's folder before anything is written to it: the
// folder --out names (given), refused with exit 2 naming the holder's pid
// while another live run holds it, or else a fresh default folder, planned
// or, when a run of the same second has that one, planned-2, ... The
// caller ends the claim with Done once the run is over.
func claimOut(planned string, given bool) (*runfolder.Claim, error) {
	var c *runfolder.Claim
	var err error
	if given {
		c, err = runfolder.ClaimDir(planned, holder())
	} else {
		c, err = runfolder.ClaimNew(planned, holder())
	}
	var held *runfolder.HeldError
	switch {
	case errors.As(err, &held) && given:
		return nil, exitcode.Usagef("--out %w", err)
	case err != nil:
		return nil, exitcode.AsUsage(err)
	}
	return c, nil
}

// holder is this p2pfault as a run folder's lock file names it: pid,
// start time (so a pid reused later is not taken for it) and command line.
func holder() runfolder.Holder {
	h := runfolder.Holder{Pid: os.Getpid(), Started: time.Now(),
		Command: strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " ")}
	if self, err := owner.Self(); err == nil {
		h.StartTicks = self.StartTicks
	}
	return h
}

// rebased is path with the folder from at its start replaced by to: a
// path planned inside the default folder, once the claim gave the run
// another (a suffixed one).
func rebased(path, from, to string) string {
	if path == from {
		return to
	}
	if rest, ok := strings.CutPrefix(path, from+string(filepath.Separator)); ok {
		return filepath.Join(to, rest)
	}
	return path
}

// claimRun claims the run's folder and moves the plan into it: its
// folder, its arms' folders and what each arm's experiment writes.
func claimRun(p *runPlan, given bool) (*runfolder.Claim, error) {
	c, err := claimOut(p.out, given)
	if err != nil {
		return nil, err
	}
	from := p.out
	p.out = c.Dir
	for i := range p.arms.dirs {
		p.arms.dirs[i] = rebased(p.arms.dirs[i], from, c.Dir)
		p.arms.configs[i].OutDir = rebased(p.arms.configs[i].OutDir, from, c.Dir)
	}
	return c, nil
}

// claimSlice claims a slice's folder (out) and moves its rows into it.
func claimSlice(out string, given bool, p *slicePlan) (*runfolder.Claim, error) {
	c, err := claimOut(out, given)
	if err != nil {
		return nil, err
	}
	for i := range p.rows {
		p.rows[i].out = rebased(p.rows[i].out, out, c.Dir)
		p.configs[i].OutDir = rebased(p.configs[i].OutDir, out, c.Dir)
	}
	return c, nil
}
