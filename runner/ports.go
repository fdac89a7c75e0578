package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/procfs"

	"p2pfault/exitcode"
)

// portFree reports whether port can be bound on Host right now. Go's
// listeners set SO_REUSEADDR, as the engines' do, so a port whose last
// connections sit in TIME_WAIT counts as free: an engine can bind it.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(Host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// tcpListenState is TCP_LISTEN in /proc/net/tcp's st column.
const tcpListenState = 0x0A

// PortHolder returns the pid and command name of a process listening on
// port, read from /proc/net/tcp{,6} and /proc/PID/fd. ok is false when
// /proc does not tell (another user's process, another network namespace).
func PortHolder(port int) (pid int, comm string, ok bool) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, "", false
	}
	inodes := map[string]bool{}
	for _, read := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		lines, err := read()
		if err != nil {
			continue
		}
		for _, l := range lines {
			if l.LocalPort == uint64(port) && l.St == tcpListenState {
				inodes[fmt.Sprintf("socket:[%d]", l.Inode)] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, "", false
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return 0, "", false
	}
	for _, p := range procs {
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			continue
		}
		for _, t := range targets {
			if inodes[t] {
				c, _ := p.Comm()
				return p.PID, c, true
			}
		}
	}
	return 0, "", false
}

// portInUse is the error for a port that cannot be bound, naming who holds
// it when /proc tells.
func portInUse(what string, port int) error {
	if pid, comm, ok := PortHolder(port); ok {
		return fmt.Errorf("%s port %d is in use by pid %d (%s)", what, port, pid, comm)
	}
	return fmt.Errorf("%s port %d is in use", what, port)
}

// resolvePorts checks every planned port: a fixed port that is taken is a
// usage error naming it and its holder; an unfixed one that is taken (every
// unfixed one with FreePorts) is replaced by a port the kernel picks.
func resolvePorts(cfg Config, plans []portPlan) ([]portPlan, error) {
	out := append([]portPlan(nil), plans...)
	used := map[int]bool{}
	for _, p := range plans {
		used[p.http], used[p.p2p] = true, true
	}
	// Hold every picked port open until all are picked, so the kernel
	// does not hand the same one out twice.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	pick := func() (int, error) {
		for range 100 {
			l, err := net.Listen("tcp", net.JoinHostPort(Host, "0"))
			if err != nil {
				return 0, fmt.Errorf("pick a free port on %s: %w", Host, err)
			}
			held = append(held, l)
			port := l.Addr().(*net.TCPAddr).Port
			if !used[port] {
				used[port] = true
				return port, nil
			}
		}
		return 0, errors.New("pick a free port: the kernel kept giving planned ports")
	}
	for i := range out {
		name := engineName(cfg.Sources, i)
		for _, slot := range []struct {
			what  string
			port  *int
			fixed bool
		}{{name + " HTTP", &out[i].http, out[i].fixedHTTP}, {name + " P2P", &out[i].p2p, out[i].fixedP2P}} {
			switch {
			case slot.fixed:
				if !portFree(*slot.port) {
					return nil, exitcode.AsUsage(fmt.Errorf("fixed %w", portInUse(slot.what, *slot.port)))
				}
			case cfg.FreePorts || !portFree(*slot.port):
				p, err := pick()
				if err != nil {
					return nil, err
				}
				*slot.port = p
			}
		}
	}
	return out, nil
}

// waitPortsFree polls until every port can be bound, or ctx ends; a killed
// engine's ports are free once the kernel has closed its sockets.
func waitPortsFree(ctx context.Context, name string, ports ...int) error {
	for {
		busy := -1
		for _, p := range ports {
			if !portFree(p) {
				busy = p
				break
			}
		}
		if busy < 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restart %s: %w: %w", name, portInUse(name, busy), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
