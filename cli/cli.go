// Package cli is p2pfault's command line: it parses flags and environment,
// wires an experiment to its faces (dashboard, headless printer, report
// writers) and maps the outcome to an exit code. It holds no logic of its
// own beyond that wiring.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/sim"
)

// Main runs p2pfault with args (without the program name) and returns the
// process exit code. SIGINT, SIGTERM, SIGHUP and SIGQUIT end the run
// (exit 130), and so does a closed stdout or stderr (notifySignals).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := notifySignals(context.Background(), stderr)
	defer stop()
	return Execute(ctx, args, stdin, stdout, stderr)
}

// Execute is Main without the signal handling: the run ends when ctx is
// done (exit 130). It is how a test runs p2pfault inside a testing/synctest
// bubble (with --engine virtual), where os/signal's process-wide watcher
// must not be started: everything Execute starts is goroutines of the
// caller's bubble.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitcode.OK
	}
	if ctx.Err() != nil && !errors.Is(err, exitcode.ErrBoundFailed) {
		err = interruption(ctx)
	}
	if !errors.Is(err, exitcode.ErrBoundFailed) {
		fmt.Fprintln(stderr, "p2pfault:", err)
	}
	return exitcode.Code(err)
}

// NewRoot builds the command tree. Bare `p2pfault` is `p2pfault run` (or,
// with FAULTS=1 as in the seed, `p2pfault slice`).
func NewRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "p2pfault",
		Short: "Fault experiments on vLLM's peer-to-peer KV-offload tier",
		Long: wrap("p2pfault starts a small cluster (N source engines and a decoder), pulls cached KV "+
			"blocks from the sources through the decoder, fires faults on a source ("+seedCasesList()+
			") and checks that the decoder notices fast and prefills locally.", 84) + "\n\n" +
			"Bare `p2pfault` opens the dashboard on the simulated cluster.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(flagError)

	runCmd, runOpts := newRunCommand()
	sliceCmd, _ := newSliceCommand()
	runOnly := runOnlyFlags(runCmd.Flags(), sliceCmd.Flags())
	root.AddCommand(runCmd, sliceCmd, newReportCommand(), newCleanupCommand(), withUsageErrors(sim.Command()), newGuardCommand(), newDoctorCommand(), newReplayCommand(), newGenDocsCommand())
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if os.Getenv("FAULTS") == "1" {
			// The seed's knob: the slice, with the flags given to bare
			// p2pfault (they are run's) and the slice's default arms and cases.
			// run's own flags have no meaning in a slice: say so rather than
			// ignore them.
			if cmd.Flags().Changed("arms") {
				return exitcode.Usagef("FAULTS=1 runs the slice of arms main,fixed: to choose its arms run `p2pfault slice --arms ...`")
			}
			for _, name := range runOnly {
				if cmd.Flags().Changed(name) {
					return exitcode.Usagef("FAULTS=1 runs the slice, which has no --%s (see `p2pfault slice --help`: --arms, --cases)", name)
				}
			}
			return runSlice(cmd, &sliceOptions{flags: runOpts.flags, arms: []string{"main", "fixed"}, cases: fault.SeedCases()})
		}
		return runRun(cmd, runOpts)
	}
	// The root also accepts run's flags, so `p2pfault --time-scale 0.5` works.
	root.Flags().AddFlagSet(runCmd.Flags())
	return root
}

// runOnlyFlags are the flags of run (whose flags bare p2pfault takes)
// that a slice does not carry: those the slice has not, and those it has
// under the same name with another meaning (run's --arm names a simulated
// arm too; the slice's is a vLLM build only). A flag the two share is
// registered by the same code, so it has the same type and help text.
// Read from the flag sets, a new run flag is refused under FAULTS=1
// without being listed anywhere.
func runOnlyFlags(run, slice *pflag.FlagSet) []string {
	var names []string
	run.VisitAll(func(f *pflag.Flag) {
		s := slice.Lookup(f.Name)
		if s == nil || s.Usage != f.Usage || s.Value.Type() != f.Value.Type() {
			names = append(names, f.Name)
		}
	})
	return names
}

// flagError turns cobra's flag errors into usage errors (exit 2). The
// message is printed after "p2pfault: ", so it names the subcommand alone
// ("run: unknown flag: --bogus"), and nothing on bare p2pfault, rather
// than "p2pfault: p2pfault run: ...".
func flagError(cmd *cobra.Command, err error) error {
	path := cmd.CommandPath()
	if sub := strings.TrimSpace(strings.TrimPrefix(path, cmd.Root().Name())); sub != "" {
		return exitcode.Usagef("%s: %w (see `%s --help`)", sub, err, path)
	}
	return exitcode.Usagef("%w (see `%s --help`)", err, path)
}

// withUsageErrors applies flagError to cmd and all its subcommands.
func withUsageErrors(cmd *cobra.Command) *cobra.Command {
	cmd.SetFlagErrorFunc(flagError)
	for _, c := range cmd.Commands() {
		withUsageErrors(c)
	}
	return cmd
}
