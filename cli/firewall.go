package cli

import (
	"fmt"
	"io"
	"strings"

	"p2pfault/netfault"
	"p2pfault/runner"
)

// warnLeftoverTables warns about the firewall tables (network faults) that
// an earlier run in dir left in the kernel, as prepareOut does for engines.
func warnLeftoverTables(dir string, stderr io.Writer) {
	left, err := runner.LeftoverTables(dir, netfault.Host{})
	if err != nil {
		return
	}
	for _, l := range left {
		what := "is still in the kernel"
		if l.Unknown {
			what = "may still be in the kernel (this process cannot list the firewall's tables)"
		}
		inForce := ""
		if len(l.Faults) > 0 {
			inForce = " (" + strings.Join(l.Faults, ", ") + " in force)"
		}
		fmt.Fprintf(stderr, "warning: firewall table inet %s of an earlier run in %s %s%s; `p2pfault cleanup %s` deletes it\n",
			l.Table, dir, what, inForce, dir)
	}
}
