package doctor

import (
	"fmt"
	"strings"

	"p2pfault/event"
	"p2pfault/runner"
)

// Ports checks the ports the run's engines would bind, as the runner
// decides at start: a fixed port (--source-port, --decoder-port,
// --p2p-port) that is taken ends the run, naming who holds it; a default
// one that is taken is replaced by a free one, and a cluster with free
// ports (--free-ports, several arms or rows at once) binds none of its
// defaults. A data-parallel source (--source-dp N) binds N P2P ports,
// base..base+N-1, one per rank: each is checked.
func Ports(h Host, clusters []Cluster) []Result {
	if len(clusters) == 0 {
		return nil
	}
	var rs []Result
	var free, moved []string
	pooled := false
	seen := map[int]bool{}
	for _, c := range clusters {
		for _, s := range c.Specs {
			for _, u := range specPorts(s) {
				if !u.fixed && c.Config.FreePorts {
					pooled = true
					continue
				}
				if seen[u.port] { // a slice's rows one after another reuse one cluster's ports
					continue
				}
				seen[u.port] = true
				if h.PortFree(u.port) {
					free = append(free, fmt.Sprintf("%s %d", u.what, u.port))
					continue
				}
				holder := ""
				if pid, comm, ok := h.PortHolder(u.port); ok {
					holder = fmt.Sprintf(" by pid %d (%s)", pid, comm)
				}
				if u.fixed {
					rs = append(rs, Result{
						Check: "ports",
						Found: fmt.Sprintf("fixed %s port %d is in use%s", u.what, u.port, holder),
						Fix:   fmt.Sprintf("stop what holds it, or fix another port with %s", u.flag),
					})
					continue
				}
				moved = append(moved, fmt.Sprintf("%s %d, in use%s", u.what, u.port, holder))
			}
		}
	}
	if len(rs) > 0 {
		return rs
	}
	var found []string
	if len(free) > 0 {
		found = append(found, "free: "+strings.Join(free, ", "))
	}
	if len(moved) > 0 {
		found = append(found, "taken, so the run binds free ones instead: "+strings.Join(moved, ", "))
	}
	if pooled {
		found = append(found, "every port not fixed comes from a pool of free ports")
	}
	return []Result{{Check: "ports", OK: true, Found: strings.Join(found, "; ")}}
}

// portUse is one port an engine binds.
type portUse struct {
	what, flag string
	port       int
	fixed      bool
}

// specPorts are the ports s binds: HTTP, then its P2P port, or each
// rank's (base + rank) on a data-parallel source.
func specPorts(s runner.Spec) []portUse {
	out := []portUse{{s.Name + " HTTP", httpFlag(s.Role), s.HTTPPort, s.FixedHTTP}}
	for r, p := range s.P2PPorts() {
		what := s.Name + " P2P"
		if s.RankCount() > 1 {
			what = event.RankName(s.Index, r) + " P2P"
		}
		out = append(out, portUse{what, "--p2p-port", p, s.FixedP2P})
	}
	return out
}

func httpFlag(r event.Role) string {
	if r == event.RoleDecoder {
		return "--decoder-port"
	}
	return "--source-port"
}
