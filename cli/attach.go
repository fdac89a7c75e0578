package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"p2pfault/attach"
	"p2pfault/attach/guard"
	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/runfolder"
)

// launchFlags are the flags that say how p2pfault launches its engines:
// with --attach there is nothing to launch, so each is a usage error.
var launchFlags = []string{
	"engine", "vllm-bin", "model", "gpus", "sources", "source-port", "decoder-port", "p2p-port",
	"free-ports", "kv-load-failure-policy", "engine-arg", "source-arg", "decoder-arg", "handshake-timeout",
}

// refuseWithAttach names every flag given that has no meaning with --attach.
func refuseWithAttach(fs *pflag.FlagSet, more ...string) error {
	var bad []string
	for _, name := range append(append([]string{}, launchFlags...), more...) {
		if fs.Changed(name) {
			bad = append(bad, "--"+name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return exitcode.Usagef("--attach: %s launch engines, and an attached cluster's engines are already running (the model, the sources and their ports come from the attach file): drop %s",
		strings.Join(bad, ", "), map[bool]string{true: "it", false: "them"}[len(bad) == 1])
}

// openAttach reads and checks the attach file (exit 2 on any problem,
// naming the source and what is wrong) and returns the cluster, faulted
// with guards (the hidden `guard` subcommand of this binary) and recorded
// in out/stalls.json. It starts and stops nothing. decoders, when given
// (--decoders; 0 not), must be the number of decoders the file lists.
func openAttach(ctx context.Context, path, out string, decoders int) (*attach.Cluster, error) {
	f, err := attach.Load(path)
	if err != nil {
		return nil, err
	}
	if n := max(len(f.Decoders), 1); decoders > 0 && decoders != n {
		return nil, exitcode.Usagef("--attach: --decoders %d: the attach file %s lists %d decoder(s) (decoders: lists several, each with its faults, as sources are)", decoders, path, n)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, exitcode.Usagef("--attach: find p2pfault's own binary for the stall guards: %w", err)
	}
	book, err := guard.NewBook(filepath.Join(out, runfolder.Stalls))
	if err != nil {
		return nil, exitcode.AsUsage(err)
	}
	return attach.Open(ctx, f, attach.Options{LogDir: out, Book: book, Guard: []string{self, "guard"}})
}

// attachMode is the mode an attach file says its engines are run for (""
// when it says none): a run's mode unless --mode (or --modes) is given.
func attachMode(path string) (string, error) {
	f, err := attach.Load(path)
	if err != nil {
		return "", err
	}
	return f.Mode, nil
}

// newGuardCommand is the hidden `p2pfault guard`, the process started with
// every attached stall (package guard): it resumes the stall if p2pfault
// dies without doing so. Its arguments are guard.Main's.
func newGuardCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "guard",
		Hidden:             true,
		DisableFlagParsing: true,
		SilenceUsage:       true,
		SilenceErrors:      true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := guard.Main(args); code != 0 {
				return &exitcode.Error{Code: code, Err: fmt.Errorf("guard exited %d (see its log)", code)}
			}
			return nil
		},
	}
}

// resumeStalls is cleanup's part for attached runs: every stalls.json in
// dirs (a run's folder, a slice's rows) names stalls a p2pfault that is
// gone may have left stopped; resume them, a commands source's with the
// resume command from gives (cleanup --attach; nil: none is run). It
// returns how many it resumed.
func resumeStalls(ctx context.Context, dirs []string, w io.Writer, from guard.ResumeFrom) (int, error) {
	total := 0
	for _, d := range dirs {
		for _, dir := range runfolder.Holding(d, runfolder.Stalls) {
			rec := filepath.Join(dir, runfolder.Stalls)
			n, err := guard.ResumeRecorded(ctx, rec, w, from)
			total += n
			if err != nil {
				return total, exitcode.AsUsage(fmt.Errorf("cleanup %s: %w", dir, err))
			}
		}
	}
	if total > 0 {
		fmt.Fprintf(w, "cleanup: resumed %d stalled engine(s)\n", total)
	}
	return total, nil
}

// cleanupResumeFrom is where cleanup takes a commands source's resume
// command from: the attach file --attach names (read and checked as a
// run reads it: exit 2 on a bad file), never the record; nil without one.
func cleanupResumeFrom(path string) (guard.ResumeFrom, error) {
	if path == "" {
		return nil, nil
	}
	f, err := attach.Load(path)
	if err != nil {
		return nil, err
	}
	return f.ResumeCommand, nil
}

// stallDirs are the folders cleanup looks for stall records in: DIR, or
// every run folder under ./p2pfault-runs.
func stallDirs(args []string) []string {
	if len(args) > 0 {
		return args
	}
	return runfolder.Runs()
}

// attachSlice fits a slice to an attached cluster: one arm (the cluster
// is what it is; the name is a label), rows one after another on the same
// engines, and remove last (a removed source stays down unless the file
// says restore_at_end, so no row could follow it).
func (o *sliceOptions) attachSlice(cmd *cobra.Command) error {
	fs := cmd.Flags()
	if err := refuseWithAttach(fs, "arm"); err != nil {
		return err
	}
	switch {
	case fs.Changed("arms") && len(o.arms) != 1:
		return exitcode.Usagef("--attach: --arms %s: an attached cluster is one arm; give one name (a label for the reports), e.g. --arms main", strings.Join(o.arms, ","))
	case !fs.Changed("arms"):
		o.arms = []string{"main"}
	}
	if fs.Changed("parallel") && o.parallel != 1 {
		return exitcode.Usagef("--attach: --parallel %d: the rows share the attached engines, so they run one after another", o.parallel)
	}
	o.parallel = 1
	for i, c := range o.cases {
		if k, ok := fault.CaseKind(c); ok && k.Ending == fault.StaysDown && i != len(o.cases)-1 {
			return exitcode.Usagef("--attach: --cases %s: %s must be the last case (p2pfault does not bring a source it took down back between rows)", strings.Join(o.cases, ","), c)
		}
	}
	return nil
}
