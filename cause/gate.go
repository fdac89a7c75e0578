package cause

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"p2pfault/event"
)

// The engaged gate: a source whose pulls never hit in the warm-up has a
// cluster that cannot be judged (exit 3), and the gate names why from
// what p2pfault saw of it, in words that say what to fix. Its evidence, in
// the order it is read (the first that speaks names the cause):
//
//  1. the decoder's log rejecting the source's connect (vLLM's protocol
//     error on a block_len, config fingerprint or hash seed mismatch), or,
//     where the log is not seen (an attached engine), the source's and
//     the decoder's PYTHONHASHSEED as their processes were started;
//  2. connection refused on the source's P2P port: the decoder's log (the
//     sim's reap line; real vLLM's ZMQ retries a refused connect silently)
//     or p2pfault's own TCP connect to the port after the warm-up;
//  3. the decoder's handshake deadline, timed out on the source;
//  4. the seeds on the source failing (it never held the prompts);
//  5. the decoder's metrics, when no source hit (decoder-wide counters then
//     speak for the failing sources only): lookups answered MISS (external
//     cache queries rose, hits did not) for prompts the source was seeded
//     with, or no byte read over P2P;
//  6. else unknown: the gate never guesses.

var (
	// session/session.py's line for a connect it refuses: since @0577fc22
	// P2PSession._on_connect's
	//   "P2PSession %s: rejecting peer connect: %s"
	// (the sim's too), before it _on_message on the ValueError of
	// _validate_connect_candidate, through _protocol_error:
	//   "P2PSession %s: protocol error: %s — disconnecting"
	// with the reason f"malformed {msg_type!r}: {exc}".
	reProtocolError = regexp.MustCompile(`P2PSession (\S+): (?:rejecting peer connect|protocol error: malformed '?connect'?): (.*?)(?: — disconnecting)?$`)
	// The sim's decoder on a refused dial (sim/engine/consumer.go
	// connectRefused): the first reaps the session with the reason, later
	// ones are summed once per heartbeat timeout.
	reRefusedDown  = regexp.MustCompile(`P2P \S+: peer (\S+) down: connection refused`)
	reRefusedStill = regexp.MustCompile(`peer (\S+) still down: (\d+) connects refused`)
)

// PeerLog is what the decoder's log said of one peer's sessions.
type PeerLog struct {
	// Rejected is the latest reason the decoder gave for refusing the
	// peer's connect, as logged ("hash seed mismatch from ...").
	Rejected          string
	Refused           int // connects refused, as the decoder's log counts them
	HandshakeTimeouts int
}

// Engagement gathers each peer's PeerLog from the decoder's lines, from
// the cluster's start (the warm-up's lines too, unlike the Tracker, whose
// pulls are measured from t0). Not safe for concurrent use.
type Engagement struct {
	peers map[string]*PeerLog
}

// NewEngagement returns an empty Engagement.
func NewEngagement() *Engagement { return &Engagement{peers: map[string]*PeerLog{}} }

func (g *Engagement) peer(p string) *PeerLog {
	l := g.peers[p]
	if l == nil {
		l = &PeerLog{}
		g.peers[p] = l
	}
	return l
}

// Log takes one engine line; only the decoder's speak of its sessions.
func (g *Engagement) Log(decoder bool, line string) {
	if !decoder {
		return
	}
	if m := reProtocolError.FindStringSubmatch(line); m != nil {
		g.peer(m[1]).Rejected = m[2]
		return
	}
	if m := reHandshake.FindStringSubmatch(line); m != nil {
		g.peer(m[1]).HandshakeTimeouts++
		return
	}
	if m := reRefusedDown.FindStringSubmatch(line); m != nil {
		g.peer(m[1]).Refused++
		return
	}
	if m := reRefusedStill.FindStringSubmatch(line); m != nil {
		n, _ := strconv.Atoi(m[2]) // \d+: only an overflow fails, and counts nothing
		g.peer(m[1]).Refused += n
	}
}

// Peer is what the decoder's log said of peer so far.
func (g *Engagement) Peer(peer string) PeerLog {
	if l := g.peers[peer]; l != nil {
		return *l
	}
	return PeerLog{}
}

// Counters are the decoder's counters' increase over the warm-up.
type Counters struct {
	ExtQueries   event.MetricValue // vllm:external_prefix_cache_queries_total, tokens
	ExtHits      event.MetricValue // vllm:external_prefix_cache_hits_total, tokens
	P2PReadBytes event.MetricValue // vllm:kv_offload_tiering_read_bytes_total{tier="1:p2p"}
}

// Evidence is what p2pfault saw of one source whose warm-up pulls never
// hit.
type Evidence struct {
	Source int
	Peer   string // the P2P address the pulls name
	Log    PeerLog
	// Dial is the error of p2pfault's own TCP connect to Peer after the
	// warm-up; nil when something accepted it, or when it was not tried
	// (Dialed false).
	Dial   error
	Dialed bool
	// SeedErr is the last warm-up seed's error on the source ("": it held).
	SeedErr string
	// Decoder is the decoder's counters over the warm-up, given only when
	// no source hit (nil otherwise, or when not scraped).
	Decoder *Counters
	// Seeds are the PYTHONHASHSEED the source's and the decoder's
	// processes were started with, when p2pfault could read both (an
	// attached engine on this host: /proc/PID/environ); nil otherwise.
	Seeds *Seeds
}

// Seeds are two engines' PYTHONHASHSEED ("unset" when not set).
type Seeds struct{ Source, Decoder string }

// Gate causes, stable: the warm-up error names them ("cause (rejected): ...").
const (
	GateRejected   = "rejected"
	GateHashSeed   = "hash_seed"
	GateRefused    = "refused"
	GateHandshake  = "handshake_timeout"
	GateSeedFailed = "seed_failed"
	GateMiss       = "lookup_miss"
	GateNoBytes    = "no_p2p_bytes"
	GateUnknown    = "unknown"
)

// Diagnose names why a source's P2P never engaged, from ev: the cause
// (Gate*) and what it says, ending with what to fix.
func Diagnose(ev Evidence) (string, string) {
	src := event.SourceName(ev.Source)
	switch {
	case ev.Log.Rejected != "":
		return GateRejected, fmt.Sprintf("the decoder's log rejects %s's connect (%s): %s",
			src, ev.Log.Rejected, rejectFix(ev.Log.Rejected))
	case ev.Seeds != nil && ev.Seeds.Source != ev.Seeds.Decoder:
		return GateHashSeed, fmt.Sprintf("%s runs with PYTHONHASHSEED=%s, the decoder with PYTHONHASHSEED=%s (their processes' environments): "+
			"engines with different seeds name blocks differently and vLLM rejects their handshake (hash seed mismatch); "+
			"give every engine the same PYTHONHASHSEED", src, ev.Seeds.Source, ev.Seeds.Decoder)
	case ev.Log.Refused > 0 || ev.Dialed && errors.Is(ev.Dial, syscall.ECONNREFUSED):
		seen := fmt.Sprintf("p2pfault's own connect to %s was refused", ev.Peer)
		if ev.Log.Refused > 0 {
			seen = fmt.Sprintf("the decoder's log reports its connects to %s refused (%d counted)", ev.Peer, ev.Log.Refused)
		}
		return GateRefused, fmt.Sprintf("connection refused on %s's P2P port: %s: nothing listens there; "+
			"the pulls must name the host:port the source's --kv-transfer-config binds "+
			"(its p2p tier's port, + its data-parallel rank; in an attach file, the source's p2p address)", src, seen)
	case ev.Log.HandshakeTimeouts > 0:
		return GateHandshake, fmt.Sprintf("the decoder's handshake with %s at %s timed out %d times (%s): "+
			"something accepts connections there but never acknowledges a connect; "+
			"check that %s is the source's P2P port and not another service's, and that the source is not stopped",
			src, ev.Peer, ev.Log.HandshakeTimeouts, TimerHandshake, ev.Peer)
	case ev.SeedErr != "":
		return GateSeedFailed, fmt.Sprintf("the seeds on %s failed (%s): the source never held the prompts the pulls ask for; "+
			"check its HTTP address and that it serves the model", src, ev.SeedErr)
	}
	if d := ev.Decoder; d != nil {
		if d.ExtQueries.OK && d.ExtQueries.V > 0 && d.ExtHits.OK && d.ExtHits.V == 0 {
			return GateMiss, fmt.Sprintf("the decoder's lookups were answered MISS for prompts %s was seeded with "+
				"(vllm:external_prefix_cache_queries_total rose by %.0f tokens, the hits by 0): the engines name blocks differently; "+
				"give them the same PYTHONHASHSEED, --block-size and model, the pulls the seed's cache_salt, "+
				"and check that %s is the P2P address of the engine seeded "+
				"(p2pfault doctor run --attach FILE compares the seeds of engines on this host)", src, d.ExtQueries.V, ev.Peer)
		}
		if d.P2PReadBytes.OK && d.P2PReadBytes.V == 0 {
			return GateNoBytes, fmt.Sprintf("no byte moved over P2P into the decoder "+
				"(vllm:kv_offload_tiering_read_bytes_total{tier=\"1:p2p\"} did not rise): the decoder never loaded a block from %s; "+
				"check that its --kv-transfer-config has the p2p tier and that the pulls reach it with kv_transfer_params", src)
		}
	}
	return GateUnknown, "cause unknown: no decoder line, refused connect or metric names it"
}

// rejectFix is what to change for a rejection's reason (vLLM's words).
func rejectFix(reason string) string {
	switch {
	case strings.Contains(reason, "hash seed mismatch"):
		return "give every engine the same PYTHONHASHSEED"
	case strings.Contains(reason, "block_len mismatch"):
		return "give every engine the same --block-size (block_len is bytes per block: the same model, dtype and tensor-parallel size too)"
	case strings.Contains(reason, "fingerprint mismatch"):
		return "serve the same model with the same --block-size and --tensor-parallel-size on every engine"
	case strings.Contains(reason, "peer_id mismatch"):
		return "the source answers under another identity: its p2p tier's host:port must be the address the pulls name, literally"
	}
	return "the engines' P2P configurations differ"
}
