package experiment

import (
	"net"
	"strconv"

	"p2pfault/fault"
	"p2pfault/runner"
)

var _ fault.Inspectable = launchedTarget{}

// Host is what /proc and the ports show of a launched engine, so the
// fault kinds can verify their effect (package verify): always readable,
// p2pfault started it here.
func (t launchedTarget) Host() (fault.Host, bool) {
	in := t.Info()
	return fault.Host{
		Sid:  in.Sid,
		Pids: append([]int(nil), in.Members...),
		Addrs: []string{
			net.JoinHostPort(runner.Host, strconv.Itoa(in.HTTPPort)),
			net.JoinHostPort(t.P2PHost(), strconv.Itoa(in.P2PPort)),
		},
		Ready: t.Engine.Healthy,
	}, true
}
