package doctor

import (
	"errors"
	"fmt"
	"slices"

	"p2pfault/netfault"
)

// Network runs the host check (Kind.Setup) of every fault kind the run
// fires that has one, looked up in the fault registry: today the network
// faults, partition and loss, which need CAP_NET_ADMIN and nftables
// (family inet). A run would end on the first missing one with exit 2.
func Network(h Host, kinds []string) []Result {
	var rs []Result
	var seen []string
	for _, name := range kinds {
		if slices.Contains(seen, name) {
			continue
		}
		seen = append(seen, name)
		k, ok := h.Kind(name)
		if !ok || k.Setup == nil {
			continue
		}
		r := Result{Check: name}
		err := k.Setup()
		var se *netfault.SetupError
		switch {
		case err == nil:
			r.OK, r.Found = true, fmt.Sprintf("the run fires %s, and its host check passes (network faults need CAP_NET_ADMIN and nftables, family inet)", name)
		case errors.As(err, &se):
			r.Found, r.Fix = se.Need+": missing here", se.How
		default:
			r.Found = fmt.Sprintf("the run fires %s, whose host check failed: %v", name, err)
		}
		rs = append(rs, r)
	}
	return rs
}
