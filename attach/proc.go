package attach

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"

	"p2pfault/runner/session"
)

// tcpListen is TCP_LISTEN in /proc/net/tcp's st column.
const tcpListen = 0x0A

// ErrNobodyListens: no socket listens on the address in this network
// namespace.
var ErrNobodyListens = errors.New("nobody listens")

// ErrOwnerHidden: a socket listens, but no process p2pfault can read holds
// it (another user's process, another PID namespace).
var ErrOwnerHidden = errors.New("the listening process cannot be found in /proc")

// Listener is the process that holds a listening socket.
type Listener struct {
	Pid   int
	Sid   int
	Pgrp  int
	Comm  string
	Inode uint64
}

// procRoot is the /proc the finder reads; a test points it at a fake tree.
var procRoot = "/proc"

// FindListener finds the process listening on host:port through
// /proc/net/tcp{,6} (the socket's inode) and /proc/*/fd (who holds it). A
// socket bound to the wildcard address counts for every host.
func FindListener(host string, port int) (Listener, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return Listener{}, fmt.Errorf("read %s: %w", procRoot, err)
	}
	want := hostIPs(host)
	inodes := map[string]uint64{}
	for _, read := range []func() (procfs.NetTCP, error){fs.NetTCP, fs.NetTCP6} {
		lines, err := read()
		if err != nil {
			continue // no IPv6, say
		}
		for _, l := range lines {
			if l.St != tcpListen || l.LocalPort != uint64(port) {
				continue
			}
			if !l.LocalAddr.IsUnspecified() && !matches(want, l.LocalAddr) {
				continue
			}
			inodes[fmt.Sprintf("socket:[%d]", l.Inode)] = l.Inode
		}
	}
	if len(inodes) == 0 {
		return Listener{}, fmt.Errorf("%s: %w", net.JoinHostPort(host, strconv.Itoa(port)), ErrNobodyListens)
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return Listener{}, fmt.Errorf("list %s: %w", procRoot, err)
	}
	for _, p := range procs {
		targets, err := p.FileDescriptorTargets()
		if err != nil {
			continue
		}
		for _, t := range targets {
			if ino, ok := inodes[t]; ok {
				st, err := session.Stat(p.PID)
				if err != nil {
					continue
				}
				return Listener{Pid: p.PID, Sid: st.Sid, Pgrp: st.Pgrp, Comm: st.Comm, Inode: ino}, nil
			}
		}
	}
	return Listener{}, fmt.Errorf("%s: %w", net.JoinHostPort(host, strconv.Itoa(port)), ErrOwnerHidden)
}

// hostIPs are the addresses host stands for on this machine.
func hostIPs(host string) []net.IP {
	if ip := net.ParseIP(host); ip != nil {
		return []net.IP{ip}
	}
	addrs, err := net.LookupIP(host)
	if err != nil {
		return nil
	}
	return addrs
}

func matches(want []net.IP, ip net.IP) bool {
	for _, w := range want {
		if w.Equal(ip) {
			return true
		}
	}
	return false
}

// launch is how a session's leader was started, read from /proc before it
// is killed so that it can be started again the same way.
type launch struct {
	Path string   // the binary (/proc/PID/exe), argv[0] when unreadable
	Argv []string // /proc/PID/cmdline
	Env  []string // /proc/PID/environ: the environment it was exec'd with
	Dir  string   // /proc/PID/cwd
	Pid  int
}

// readLaunch reads pid's command line, environment and working folder.
func readLaunch(pid int) (launch, error) {
	dir := procRoot + "/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		return launch{}, fmt.Errorf("read command line of pid %d: %w", pid, err)
	}
	argv := splitNul(cmdline)
	if len(argv) == 0 {
		return launch{}, fmt.Errorf("pid %d has an empty command line (a kernel thread or a zombie)", pid)
	}
	environ, err := os.ReadFile(dir + "/environ")
	if err != nil {
		return launch{}, fmt.Errorf("read environment of pid %d: %w", pid, err)
	}
	cwd, err := os.Readlink(dir + "/cwd")
	if err != nil {
		return launch{}, fmt.Errorf("read working folder of pid %d: %w", pid, err)
	}
	path, err := os.Readlink(dir + "/exe")
	// A binary replaced since it started reads "(deleted)": fall back to
	// the name it was started by.
	if err != nil || strings.HasSuffix(path, " (deleted)") {
		path = argv[0]
	}
	return launch{Path: path, Argv: argv, Env: splitNul(environ), Dir: cwd, Pid: pid}, nil
}

func splitNul(b []byte) []string {
	s := strings.TrimRight(string(b), "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// leader is the process to restart a session from: its leader (pid ==
// sid) while it lives, else the topmost live ancestor of the listener that
// is still in the session.
func leader(l Listener) (int, error) {
	if st, err := session.Stat(l.Sid); err == nil && st.Live() && st.Sid == l.Sid {
		return l.Sid, nil
	}
	pid := l.Pid
	for {
		st, err := session.Stat(pid)
		if err != nil {
			return 0, fmt.Errorf("walk up from pid %d: %w", l.Pid, err)
		}
		pst, err := session.Stat(st.PPid)
		if err != nil || pst.Sid != l.Sid || !pst.Live() {
			return pid, nil
		}
		pid = st.PPid
	}
}

// ownSession checks that the listener's session is the engine's alone, as
// local faults need: signalling the session must not reach a process that
// is not the engine. A session whose leader is in another process group
// than the engine is a job-control shell's (a tmux pane, a terminal where
// `vllm serve &` was typed): stalling it would stop the shell, killing it
// would close the pane, and restarting its leader would start a shell.
func ownSession(l Listener) error {
	if err := session.Guard(l.Sid); err != nil {
		return err
	}
	lead, err := session.Stat(l.Sid)
	if err != nil || !lead.Live() || lead.Sid != l.Sid {
		return nil // the leader is gone: the session holds what it started
	}
	if lead.Pgrp != l.Pgrp {
		return fmt.Errorf("session %d is led by pid %d (%s), which is not in the engine's process group %d (a shell's job?); faulting the session would stop or kill that shell",
			l.Sid, lead.Pid, lead.Comm, l.Pgrp)
	}
	return nil
}

// ProcEnv reads /proc/PID/environ: the environment the process was
// started with (what PYTHONHASHSEED its engine hashes blocks with).
func ProcEnv(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, err
	}
	var env []string
	for _, kv := range strings.Split(string(b), "\x00") {
		if kv != "" {
			env = append(env, kv)
		}
	}
	return env, nil
}
