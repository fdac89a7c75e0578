package probe_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/spf13/cobra"

	"p2pfault/exitcode"
	"p2pfault/sim"
)

// TestMain lets the test binary act as p2pfault when P2PFAULT_TEST_MAIN=1,
// so tests and benchmarks start real simulated engines without building the
// binary; the sim front end re-executes this binary for its engine core.
func TestMain(m *testing.M) {
	if os.Getenv("P2PFAULT_TEST_MAIN") == "1" {
		root := &cobra.Command{Use: "p2pfault", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(sim.Command())
		root.SetArgs(os.Args[1:])
		err := root.Execute()
		if err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
		os.Exit(exitcode.Code(err))
	}
	os.Exit(m.Run())
}
