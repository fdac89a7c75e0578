package sim

import (
	"fmt"
	"os"
	"testing"

	"github.com/spf13/cobra"

	"p2pfault/exitcode"
)

// TestMain lets the test binary act as p2pfault when P2PFAULT_TEST_MAIN=1,
// so tests start real engines (front end and core) without building the
// binary: the front end re-executes os.Executable(), i.e. this binary.
func TestMain(m *testing.M) {
	if os.Getenv("P2PFAULT_TEST_MAIN") == "1" {
		root := &cobra.Command{Use: "p2pfault", SilenceUsage: true, SilenceErrors: true}
		root.AddCommand(Command())
		root.SetArgs(os.Args[1:])
		err := root.Execute()
		if err != nil {
			fmt.Fprintln(os.Stderr, "Error:", err)
		}
		os.Exit(exitcode.Code(err))
	}
	os.Exit(m.Run())
}
