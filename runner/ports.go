package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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
	inodes := listeners(fs, port)
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

// listeners are the sockets listening on port, as /proc/net/tcp{,6} shows
// them ("socket:[INODE]", as /proc/PID/fd names them).
func listeners(fs procfs.FS, port int) map[string]bool {
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
	return inodes
}

// listening reports whether /proc shows a socket listening on port (false
// when /proc cannot be read).
func listening(port int) bool {
	fs, err := procfs.NewDefaultFS()
	return err == nil && len(listeners(fs, port)) > 0
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
// unfixed one with FreePorts) is replaced by a free one from cfg.Ports'
// pool.
func resolvePorts(cfg Config, plans []portPlan) ([]portPlan, error) {
	out := append([]portPlan(nil), plans...)
	pool := cfg.PortPool
	if pool == nil {
		pool = NewPortPool()
	}
	avoid := map[int]bool{}
	for _, p := range plans {
		avoid[p.http] = true
		for _, q := range p.p2pPorts() {
			avoid[q] = true
		}
	}
	for i := range out {
		name := engineName(cfg.Sources, plans, i)
		for _, slot := range []struct {
			what  string
			port  *int
			n     int // consecutive ports from *port: a data-parallel source's P2P ports, one per rank
			fixed bool
		}{{name + " HTTP", &out[i].http, 1, out[i].fixedHTTP}, {name + " P2P", &out[i].p2p, out[i].rankCount(), out[i].fixedP2P}} {
			taken := takenIn(*slot.port, slot.n)
			switch {
			case slot.fixed:
				if taken >= 0 {
					return nil, exitcode.AsUsage(fmt.Errorf("fixed %w", portInUse(slot.what, taken)))
				}
			case cfg.FreePorts || taken >= 0:
				p, err := pool.pickRun(avoid, slot.n)
				if err != nil {
					return nil, err
				}
				*slot.port = p
			}
		}
	}
	return out, nil
}

// takenIn is the first port of [first, first+n) that cannot be bound, or
// -1 when all can.
func takenIn(first, n int) int {
	for p := first; p < first+n; p++ {
		if !portFree(p) {
			return p
		}
	}
	return -1
}

// PortPool hands out free ports for engines. An engine binds its ports
// seconds after they are picked (the model load), so a picked port must
// not be one the kernel may give to an outgoing connection meanwhile (the
// ephemeral range, where port 0 picks from), nor one another cluster of
// this process picked: the pool draws from below the ephemeral range and
// never hands out a port twice. Clusters started side by side (the slice)
// share one pool.
type PortPool struct {
	mu     sync.Mutex
	given  map[int]bool
	lo, hi int // draw from [lo, hi)
	rng    *rand.Rand
}

// NewPortPool returns a pool drawing from 10000 up to the start of the
// kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range).
func NewPortPool() *PortPool {
	hi := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > 11000 {
				hi = lo
			}
		}
	}
	return &PortPool{given: map[int]bool{}, lo: 10000, hi: hi, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))}
}

// pick returns a port that is free now, was never given by this pool and
// is not in avoid.
func (p *PortPool) pick(avoid map[int]bool) (int, error) { return p.pickRun(avoid, 1) }

// pickRun returns the first of n consecutive ports that are all free now,
// never given by this pool and not in avoid: a data-parallel engine binds
// rank r's P2P listener at base+r (vLLM #47636), so its ports must be a run.
func (p *PortPool) pickRun(avoid map[int]bool, n int) (int, error) {
	n = max(n, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 1000 {
		first := p.lo + p.rng.IntN(p.hi-p.lo-n+1)
		ok := true
		for port := first; port < first+n && ok; port++ {
			ok = !p.given[port] && !avoid[port] && portFree(port)
		}
		if !ok {
			continue
		}
		for port := first; port < first+n; port++ {
			p.given[port], avoid[port] = true, true
		}
		return first, nil
	}
	if n == 1 {
		return 0, fmt.Errorf("pick a free port on %s in [%d, %d): none found in 1000 tries", Host, p.lo, p.hi)
	}
	return 0, fmt.Errorf("pick %d consecutive free ports on %s in [%d, %d): none found in 1000 tries", n, Host, p.lo, p.hi)
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

// replacementSpec is how e is started in its own place on new ports: an
// HTTP and a P2P port drawn from the cluster's pool, free now and held by
// no engine of the cluster, and the command line built for them from the
// cluster's one template.
func (c *Cluster) replacementSpec(e *Engine) (Spec, error) {
	pool := c.cfg.PortPool
	if pool == nil {
		pool = NewPortPool()
	}
	plans := make([]portPlan, len(c.engines))
	avoid := map[int]bool{}
	idx := -1
	for i, x := range c.engines {
		s := x.Spec()
		plans[i] = portPlan{http: s.HTTPPort, p2p: s.P2PPort, ranks: s.Ranks}
		avoid[s.HTTPPort] = true
		for _, q := range plans[i].p2pPorts() {
			avoid[q] = true
		}
		if x == e {
			idx = i
		}
	}
	if idx < 0 {
		return Spec{}, fmt.Errorf("%s is not an engine of this cluster", e.spec.Name)
	}
	http, err := pool.pick(avoid)
	if err != nil {
		return Spec{}, err
	}
	p2p, err := pool.pickRun(avoid, plans[idx].rankCount())
	if err != nil {
		return Spec{}, err
	}
	plans[idx] = portPlan{http: http, p2p: p2p, ranks: plans[idx].ranks}
	specs, err := buildSpecs(c.cfg, plans)
	if err != nil {
		return Spec{}, err
	}
	return specs[idx], nil
}
