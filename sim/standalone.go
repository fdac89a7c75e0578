package sim

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"p2pfault/exitcode"
)

// StandaloneEnv names the variable that makes a test binary act as
// p2pfault's `sim` command: tests start real engines by re-executing
// themselves, and the front end re-executes os.Executable() for its core,
// so that binary must answer `sim core` too. A TestMain calls
// RunStandalone when the variable is "1".
const StandaloneEnv = "P2PFAULT_TEST_MAIN"

// RunStandalone runs args (without the program name, e.g. "sim", "serve",
// MODEL, ...) as `p2pfault` with only its `sim` command, and returns the
// exit code.
func RunStandalone(args []string) int {
	root := &cobra.Command{Use: "p2pfault", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(Command())
	root.SetArgs(args)
	err := root.Execute()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
	}
	return exitcode.Code(err)
}
