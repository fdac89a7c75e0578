// Package netenv is how p2pfault's parts listen and dial. A part that
// serves or connects (the simulated engine, the probe's HTTP client, the
// scraper) takes a Network instead of calling package net, so the same code
// runs on the operating system's network (OS, the default) or on an
// in-memory one (package memnet) where a test's fake clock drives every
// engine of a cluster in one process.
package netenv

import (
	"context"
	"net"
)

// Network listens and dials by address, as package net does.
type Network interface {
	// Listen announces on the local address (network "tcp").
	Listen(network, address string) (net.Listener, error)
	// DialContext connects to the address; ctx bounds the connect.
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// OS is the operating system's network: net.Listen and a net.Dialer.
type OS struct {
	// Dialer's options (keep-alive, local address) apply to every dial;
	// its zero value is net's default.
	Dialer net.Dialer
}

var _ Network = OS{}

// Listen is net.Listen.
func (OS) Listen(network, address string) (net.Listener, error) {
	return net.Listen(network, address)
}

// DialContext is the Dialer's DialContext.
func (o OS) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return o.Dialer.DialContext(ctx, network, address)
}

// Or is n, or the operating system's network when n is nil: a part's
// configuration leaves its Network unset to mean the real one.
func Or(n Network) Network {
	if n == nil {
		return OS{}
	}
	return n
}
