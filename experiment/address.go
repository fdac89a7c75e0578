package experiment

import (
	"fmt"

	"p2pfault/event"
	"p2pfault/fault"
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
	if pr == nil {
		// The probe is not made yet: it will read the target then.
		return
	}
	t, err := e.source(src)
	if err != nil {
		return
	}
	if src < 0 {
		e.readdressDecoder(pr, -1-src, t)
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

// readdressDecoder points the probe's pulls of decoder d at its target's
// URL now (a replaced decoder's new engine; the fault's verification names
// the new address), with a warning when the probe cannot take it.
func (e *Experiment) readdressDecoder(pr *probe.Prober, d int, t Target) {
	if _, err := pr.ReaddressDecoder(d, t.HTTPURL()); err != nil {
		e.emit(event.Event{Kind: event.KindWarning, Message: fmt.Sprintf(
			"%s answers at a new address the probe cannot send to: %v (pulls go on to the old one)", fault.DecoderTarget(d), err)})
	}
}
