package memnet

import (
	"net"
	"time"
)

type listener struct {
	f       *Fabric
	host    *Host
	addr    *net.TCPAddr
	backlog []*conn
	closed  bool
	acc     signal // its Accept calls wait on it
}

func (l *listener) Accept() (net.Conn, error) {
	f := l.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if l.closed {
			return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
		}
		if l.host.frozen || len(l.backlog) == 0 {
			f.wait(&l.acc, l.host, time.Time{}, nil)
			continue
		}
		c := l.backlog[0]
		l.backlog = l.backlog[1:]
		return c, nil
	}
}

func (l *listener) Close() error {
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	if l.closed {
		return &net.OpError{Op: "close", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
	l.close()
	return nil
}

// close unbinds l; connects never accepted are reset, as the kernel does.
func (l *listener) close() {
	l.closed = true
	l.acc.wake()
	if l.f.ports[l.addr.Port] == l {
		delete(l.f.ports, l.addr.Port)
	}
	delete(l.host.lns, l)
	for _, c := range l.backlog {
		if !c.closed {
			c.drop()
			c.out.rst = true
		}
	}
	l.backlog = nil
}

func (l *listener) Addr() net.Addr { return l.addr }
