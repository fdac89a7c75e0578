package experiment

import (
	"context"
	"fmt"
	"strings"
	"time"

	"p2pfault/cause"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/netenv"
	"p2pfault/probe"
)

// The engaged gate: a warm-up whose pulls never hit on some source ends
// the run as one that cannot be judged (exit 3), not as a usage error,
// with the cause package cause names from the evidence (cause.Diagnose):
// the decoder's lines on the source's sessions since the cluster started,
// p2pfault's own connect to the source's P2P port, the last seed, and the
// decoder's counters over the warm-up.

// gateDial bounds p2pfault's own connect to a P2P port (not scaled: the
// kernel answers a refused connect at once, an accepted one in a round
// trip).
const gateDial = 2 * time.Second

// notEngaged is the warm-up's error err as the gate names it.
func (e *Experiment) notEngaged(ctx context.Context, cl Cluster, err error) error {
	nws := probe.NotWarmOf(err)
	if len(nws) == 0 {
		return exitcode.AsUsage(fmt.Errorf("warm-up: %w", err))
	}
	network := netenv.Or(networkOf(cl))
	lines := make([]string, 0, len(nws))
	decSeed, decOK := hashSeedOf(cl.Decoder())
	for _, nw := range nws {
		ev := cause.Evidence{Source: nw.Source, Peer: nw.Peer, SeedErr: nw.Last.SeedErr, Dialed: true}
		ev.Dial = dialOnce(ctx, network, nw.Peer)
		if src, ok := sourceAt(cl, nw.Source); ok && decOK {
			if seed, ok := hashSeedOf(src); ok {
				ev.Seeds = &cause.Seeds{Source: seed, Decoder: decSeed}
			}
		}
		ev.Log, ev.Decoder = e.evidence.gate(nw.Peer, len(nws) == len(cl.Sources()))
		c, words := cause.Diagnose(ev)
		lines = append(lines, fmt.Sprintf("%s\n  cause (%s): %s", nw.Error(), c, words))
	}
	return exitcode.NotJudgedf("warm-up: P2P never engaged, so the run cannot be judged:\n%s", strings.Join(lines, "\n"))
}

// environer is a target that can say what environment its engine's
// process was started with (an attached engine on this host).
type environer interface {
	Environ() ([]string, error)
}

// hashSeedOf is t's PYTHONHASHSEED ("unset" when not set); ok false when
// its environment cannot be read.
func hashSeedOf(t Target) (string, bool) {
	en, ok := t.(environer)
	if !ok {
		return "", false
	}
	env, err := en.Environ()
	if err != nil {
		return "", false
	}
	for _, kv := range env {
		if v, found := strings.CutPrefix(kv, "PYTHONHASHSEED="); found && v != "" {
			return v, true
		}
	}
	return "unset", true
}

// sourceAt is cl's source of index i.
func sourceAt(cl Cluster, i int) (Target, bool) {
	for _, s := range cl.Sources() {
		if s.Index() == i {
			return s, true
		}
	}
	return nil, false
}

// dialOnce connects to addr and hangs up: nil when something accepted.
func dialOnce(ctx context.Context, n netenv.Network, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, gateDial)
	defer cancel()
	c, err := n.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// gate is the engaged gate's evidence on peer: the decoder's lines on its
// sessions, and with all its counters' rise over the warm-up.
func (ev *evidence) gate(peer string, all bool) (cause.PeerLog, *cause.Counters) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var c *cause.Counters
	if all {
		c = ev.warmCounters()
	}
	return ev.engaged.Peer(peer), c
}

// noteWarmReading keeps the decoder's first and latest scrape before t0.
func (ev *evidence) noteWarmReading(m *event.MetricsInfo, decoder string) {
	if m == nil || m.Engine != decoder {
		return
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	r := m.Reading
	if ev.warmFirst == nil {
		ev.warmFirst = &r
	}
	ev.warmLast = &r
}

// warmCounters is the decoder's counters' rise over the warm-up's scrapes
// (nil with fewer than two). ev.mu is held.
func (ev *evidence) warmCounters() *cause.Counters {
	if ev.warmFirst == nil || ev.warmLast == ev.warmFirst {
		return nil
	}
	rise := func(get func(event.Reading) event.MetricValue) event.MetricValue {
		a, b := get(*ev.warmFirst), get(*ev.warmLast)
		if !a.OK || !b.OK {
			return event.MetricValue{}
		}
		return event.MetricOf(max(b.V-a.V, 0))
	}
	return &cause.Counters{
		ExtQueries:   rise(func(r event.Reading) event.MetricValue { return r.ExtQueries }),
		ExtHits:      rise(func(r event.Reading) event.MetricValue { return r.ExtHits }),
		P2PReadBytes: rise(func(r event.Reading) event.MetricValue { return r.P2PReadBytes }),
	}
}
