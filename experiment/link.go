package experiment

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/netenv"
	"p2pfault/relay"
)

// The run's links (Config.Link): a protocol-aware relay (package relay)
// between each decoder and each source rank, named in the pull instead of
// the source (probe.Config.Via), so a fault can act on single control
// messages and on the link with the engines untouched. A link is made as
// the first pull of its pair names it (warm-up included) and closed after
// the cluster stops; a source answering at a new address (a replace) gets
// new links for it.

// linkKey is one pair: a source rank at its address, and a decoder.
type linkKey struct {
	source, rank, decoder int
	peer                  string // the source rank's own P2P address
}

// links are a run's links.
type links struct {
	nw       netenv.Network
	decoders []string // each decoder's own P2P address, by index
	warn     func(string)
	wire     func(event.WireMsg) // every message through a link (noteWire)

	mu     sync.Mutex
	closed bool
	byKey  map[linkKey]*relay.Link
	failed map[linkKey]bool // warned once: its pulls name the source itself
}

// newLinks are the links of a run on cl (nil without Config.Link).
func (e *Experiment) newLinks(cl Cluster) *links {
	if !e.cfg.Link {
		return nil
	}
	ls := &links{nw: networkOf(cl), byKey: map[linkKey]*relay.Link{}, failed: map[linkKey]bool{},
		warn: func(msg string) { e.emit(event.Event{Kind: event.KindWarning, Message: msg}) }, wire: e.noteWire}
	for _, d := range decodersOf(cl) {
		ls.decoders = append(ls.decoders, net.JoinHostPort(d.P2PHost(), strconv.Itoa(d.P2PPort())))
	}
	return ls
}

// via is probe.Config.Via: the link's address for the pair, made if need
// be; the source's own when no link can be made (said once).
func (ls *links) via(source, rank, decoder int, peer string) string {
	k := linkKey{source, rank, decoder, peer}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.byKey[k]; l != nil {
		return l.SourceAddr()
	}
	if ls.closed || ls.failed[k] || decoder >= len(ls.decoders) {
		return peer
	}
	// The link's address is known once New returns; a message crosses
	// only after a pull names it, but the trace reads it atomically.
	var addr atomic.Pointer[string]
	l, err := relay.New(relay.Config{
		Name: linkName(source, rank, decoder, len(ls.decoders)), Decoder: ls.decoders[decoder], Source: peer,
		Net: ls.nw, Seed: uint64(source)<<16 | uint64(rank)<<8 | uint64(decoder),
		Trace: func(r relay.Record) {
			if a := addr.Load(); a != nil {
				ls.wire(wireMsg(r, source, *a))
			}
		},
	})
	if err != nil {
		ls.failed[k] = true
		ls.warn(fmt.Sprintf("no link for %s: %v (its pulls name the source itself)", linkName(source, rank, decoder, len(ls.decoders)), err))
		return peer
	}
	a := l.SourceAddr()
	addr.Store(&a)
	ls.byKey[k] = l
	return a
}

// wireMsg is a link's record as the run's events carry it.
func wireMsg(r relay.Record, source int, peer string) event.WireMsg {
	w := event.WireMsg{Pair: r.Pair, Source: source, Peer: peer, Dir: event.WireToSource, Type: r.Type,
		KVRequestID: r.KVRequestID, Keys: r.Keys, Hits: r.Hits}
	if r.Dir == relay.ToDecoder {
		w.Dir = event.WireToDecoder
	}
	if r.Verb != relay.Pass {
		w.Verb = r.Verb.String()
	}
	return w
}

// linkName names a pair as the timeline does: decoder-D>source-N/rankR,
// the decoder and rank left out when there is one.
func linkName(source, rank, decoder, decoders int) string {
	name := event.SourceName(source)
	if rank > 0 {
		name += "/rank" + strconv.Itoa(rank)
	}
	if decoders > 1 {
		name = "decoder-" + strconv.Itoa(decoder) + ">" + name
	}
	return name
}

// all are the links made so far.
func (ls *links) all() []*relay.Link {
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]*relay.Link, 0, len(ls.byKey))
	for _, l := range ls.byKey {
		out = append(out, l)
	}
	return out
}

// close closes every link; none is made after.
func (ls *links) close() {
	if ls == nil {
		return
	}
	ls.mu.Lock()
	ls.closed = true
	all := ls.byKey
	ls.byKey = map[linkKey]*relay.Link{}
	ls.mu.Unlock()
	for _, l := range all {
		l.Close()
	}
}

// Links are the links of the fired source, one rank's or every rank's,
// with one decoder (a pair) or every one (fault.LinkEnv).
func (f *firing) Links(string) ([]*relay.Link, error) {
	ls := f.e.links
	if ls == nil {
		return nil, errors.New("this run relays no link (run with --link)")
	}
	src := f.src
	if f.pairSrc >= 0 {
		src = f.pairSrc
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out []*relay.Link
	for k, l := range ls.byKey {
		if k.source == src && (f.rank < 0 || k.rank == f.rank) && (f.decoder < 0 || k.decoder == f.decoder) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b *relay.Link) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

var _ fault.LinkEnv = (*firing)(nil)

// linkPoller sends the links' counts once a period while they move, so a
// face shows what each link passed and withheld, heartbeats included
// (which no wire event carries).
type linkPoller struct {
	ls    *links
	every time.Duration
}

func (p linkPoller) Run(ctx context.Context, emit func(event.Event)) {
	var last []event.LinkCounts
	Every(ctx, p.every, func() {
		now := p.ls.counts()
		if len(now) == 0 || slices.Equal(now, last) {
			return
		}
		last = now
		emit(event.Event{Kind: event.KindLink, Links: now})
	})
}

// counts are every link's counts, by pair name.
func (ls *links) counts() []event.LinkCounts {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make([]event.LinkCounts, 0, len(ls.byKey))
	for k, l := range ls.byKey {
		out = append(out, linkCounts(l.Name(), k.source, l.Counters()))
	}
	slices.SortFunc(out, func(a, b event.LinkCounts) int { return strings.Compare(a.Pair, b.Pair) })
	return out
}

// linkCounts sums a link's counters over the message types and both
// directions.
func linkCounts(pair string, source int, c relay.Counters) event.LinkCounts {
	out := event.LinkCounts{Pair: pair, Source: source}
	for _, n := range c.Messages {
		out.Passed += n.Passed
		out.Withheld += n.Held
		out.Dropped += n.Dropped
		out.Delayed += n.Delayed
	}
	for _, n := range c.Heartbeats {
		out.Heartbeats += n
	}
	return out
}
