package doctor

import (
	"fmt"
	"strings"

	"p2pfault/netfault"
	"p2pfault/runner"
)

// Orphans reports p2pfault's host state whose owner is gone (a run killed
// before it could undo it): a firewall table still dropping loopback
// packets, an engine still holding its ports and GPU memory. Either can
// fail or skew the next run, so each is a failed check; the doctor only
// reports them, as it reports everything, and names the command that
// undoes them.
func Orphans(h Host) []Result {
	if h.Orphans == nil {
		return nil
	}
	found, err := h.Orphans()
	r := Result{Check: "leftovers"}
	switch {
	case len(found) > 0:
		r.Found = fmt.Sprintf("%s left by a p2pfault that is gone: %s", plural(len(found), "orphan"), strings.Join(found, "; "))
		r.Fix = "`p2pfault cleanup --orphans` deletes such tables and ends such engines"
	case err != nil:
		r.OK, r.Found = true, "no engine of a p2pfault that is gone; "+err.Error()
	default:
		r.OK, r.Found = true, "no firewall table or engine of a p2pfault that is gone"
	}
	return []Result{r}
}

// systemOrphans lists this host's orphans (runner.Orphans), as Orphans
// prints them.
func systemOrphans() ([]string, error) {
	found, err := runner.Orphans(netfault.Host{})
	var out []string
	for _, o := range found {
		out = append(out, o.String())
	}
	return out, err
}
