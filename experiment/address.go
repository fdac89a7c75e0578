package experiment

import (
	"fmt"

	"p2pfault/event"
	"p2pfault/probe"
)

// The address the probe names each source by is a fact of the stream: an
// address event for every source when the probe is made, and one more
// each time a source's target answers at another address (fault kind
// replace). From the event's At on, no pull names the old address
// (probe.Prober.Readdress), so a face or a test reads which address a
// pull should have named from the events alone.

// emitAddresses sends the address event of every source as the probe
// starts naming them.
func (e *Experiment) emitAddresses(pr *probe.Prober) {
	for _, s := range pr.Addresses() {
		e.emit(event.Event{Kind: event.KindAddress, Address: &event.AddressInfo{
			Source: s.Index, URL: s.URL, P2P: probe.Peer(s),
		}})
	}
}

// readdress points the probe at source src's address as its target has it
// now, and sends the address event when it changed. Kinds call it through
// Env.Changed once the target is ready (a replaced source's new engine).
func (e *Experiment) readdress(src int) {
	pr := e.run.prober()
	if pr == nil || src < 0 {
		// The probe is not made yet (it will read the target then), or
		// src is a decoder (targetKey), whose restart keeps its ports.
		return
	}
	t, err := e.source(src)
	if err != nil {
		return
	}
	sw, err := pr.Readdress(probeSource(t))
	if err != nil {
		e.emit(event.Event{Kind: event.KindWarning, Message: fmt.Sprintf(
			"%s answers at a new address the probe cannot name: %v (pulls go on naming the old one)", event.SourceName(src), err)})
		return
	}
	if !sw.Changed {
		return
	}
	e.emit(event.Event{Kind: event.KindAddress, Address: &event.AddressInfo{
		Source: t.Index(), URL: t.HTTPURL(), P2P: sw.Peer, Prev: sw.Prev, At: e.run.rel(sw.At),
	}})
}
