package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"p2pfault/exitcode"
	"p2pfault/netfault"
	"p2pfault/runner"
)

// addOrphansFlag gives cleanup --orphans: after the records of DIR (when
// one is given), sweep the host for p2pfault state whose owner is gone,
// which no record may name (a run SIGKILLed before it wrote one, or whose
// record another run overwrote). Without DIR, --orphans sweeps only.
func addOrphansFlag(cmd *cobra.Command) {
	var on bool
	cmd.Flags().BoolVar(&on, "orphans", false, "also find and undo, host-wide, the firewall tables and engines of every p2pfault that is gone (each names its owner's pid and start time), even those no record names; without DIR, only that")
	records := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if !on {
			return records(cmd, args)
		}
		if len(args) > 0 {
			if err := records(cmd, args); err != nil {
				return err
			}
		}
		w := cmd.OutOrStdout()
		n, err := runner.CleanupOrphans(cmd.Context(), netfault.Host{}, w)
		if err != nil {
			return exitcode.AsUsage(fmt.Errorf("cleanup --orphans: %w", err))
		}
		if n > 0 {
			fmt.Fprintf(w, "cleanup --orphans: ended %d orphaned engine session(s)\n", n)
		}
		return nil
	}
}
