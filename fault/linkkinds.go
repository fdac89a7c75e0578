package fault

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"p2pfault/event"
	"p2pfault/relay"
	"p2pfault/sim/wire"
)

// The link kinds, each a registration over link.go's machinery.
const (
	ActionMute      = "mute"       // withhold every lookup_resp while heartbeats flow: the half-open peer
	ActionHoldAck   = "hold-ack"   // withhold connect_ack: the handshake never completes
	ActionDrop      = "drop"       // drop MSG: lose every message of one type
	ActionDelay     = "delay"      // delay MSG:D: deliver every message of one type D late
	ActionLateFetch = "late-fetch" // hold each fetch past the source's unbound-store timeout
	ActionLatency   = "latency"    // latency D[±J]: every frame D (± J) late, in order
	ActionBandwidth = "bandwidth"  // bandwidth R: the link's bytes at R per second
	ActionReset     = "reset"      // reset: every connection RST both ways
	ActionSlowClose = "slow-close" // slow-close D: a side's close passed on D late
)

// msgDir is the direction each message a kind may name crosses the link.
var msgDir = map[string]relay.Dir{
	wire.TypeLookupResp: relay.ToDecoder, wire.TypeFetch: relay.ToSource, wire.TypeTransferDone: relay.ToDecoder,
	wire.TypeAbortFetch: relay.ToSource, wire.TypeAbortAck: relay.ToDecoder,
}

// DefaultLateFetch is late-fetch's hold: vLLM's unbound_store_timeout_s
// (60 s, manager.py, #53453) and a second.
const DefaultLateFetch = 61 * time.Second

func init() {
	// The message kinds a dashboard key fires (m, A) are listed in `?`
	// only, as unlink (x) is, so the one-line help keeps to 80 columns.
	registerLink(&Kind{Name: ActionMute, Key: "m", Help: "mute", LongHelp: "mute (half-open)", Order: 90, MoreHelp: true, Badge: "MUTED"},
		func(*Fire) (linkSpec, error) {
			return messageSpec(wire.TypeLookupResp, relay.Action{Verb: relay.Hold}), nil
		})
	registerLink(&Kind{Name: ActionHoldAck, Key: "A", Help: "hold-ack", LongHelp: "hold connect_ack", Order: 91, MoreHelp: true, Badge: "ACK HELD"},
		func(*Fire) (linkSpec, error) {
			// The sessions up now were acked already: their connections
			// are reset, so the decoder's next pull opens one whose ack
			// is withheld.
			s := linkSpec{fault: only(relay.ToDecoder, wire.TypeConnectAck, relay.Action{Verb: relay.Hold}), reset: true,
				effect: counted(relay.ToDecoder, wire.TypeConnectAck, relay.Hold)}
			return s, nil
		})
	registerLink(&Kind{Name: ActionDrop, Help: "drop", LongHelp: "drop one message type", Order: 92, Badge: "DROPPING",
		Arg: &Arg{Name: "a message type (" + msgNames() + ")", Check: func(s string) error { _, err := parseMsg(s); return err }}},
		func(f *Fire) (linkSpec, error) {
			typ, err := parseMsg(f.Arg)
			return messageSpec(typ, relay.Action{Verb: relay.Drop}), err
		})
	registerLink(&Kind{Name: ActionDelay, Help: "delay", LongHelp: "delay one message type", Order: 93, Badge: "DELAYING",
		Arg: &Arg{Name: "a message type and a delay, as fetch:2s", Check: func(s string) error { _, _, err := parseMsgDelay(s); return err }}},
		func(f *Fire) (linkSpec, error) {
			typ, d, err := parseMsgDelay(f.Arg)
			return messageSpec(typ, relay.Action{Verb: relay.Delay, Delay: d}), err
		})
	registerLink(&Kind{Name: ActionLateFetch, Help: "late-fetch", LongHelp: "fetch after the store was reaped", Order: 94, Badge: "LATE FETCH",
		// A case too (#53128): in PD mode, where a prefill's store waits
		// unbound for the decode leg's fetch.
		Case: OwnCase, Preset: &CasePreset{Mode: event.ModePD,
			Why: "#53128: a fetch after the prefill's store was reaped (unbound_store_timeout_s) is a PD decode leg's"},
		Arg: &Arg{Name: "how late, as 61s (default: vLLM's unbound_store_timeout_s 60 s and a second)", Optional: true, Check: checkOptionalDuration}},
		func(f *Fire) (linkSpec, error) {
			d := DefaultLateFetch
			if f.Arg != "" {
				var err error
				if d, err = parsePositive(f.Arg); err != nil {
					return linkSpec{}, err
				}
			}
			return messageSpec(wire.TypeFetch, relay.Action{Verb: relay.Delay, Delay: d}), nil
		})
	registerToxics()
	registerPresets()
}

// The presets: cases (`run --case half-open`, `slice --cases ...`) of the
// failures vLLM's P2P tier is fixing, each a link kind with its words
// fixed, fired on source-0 at the run's fault time for its fault length.
const (
	CaseHalfOpen    = "half-open"    // mute: #56823, #56836's lookup progress deadline
	CaseAckWithheld = "ack-withheld" // hold-ack: #51504's review, VLLM_P2P_HANDSHAKE_TIMEOUT_S
	CaseFetchLost   = "fetch-lost"   // drop transfer_done: #49820, #49877
	CaseSlowLink    = "slow-link"    // latency 100ms±20ms both ways
)

func registerPresets() {
	registerLink(&Kind{Name: CaseHalfOpen, Help: "half-open", LongHelp: "half-open peer (#56823)", Order: 100, Badge: "MUTED", Case: OwnCase},
		func(*Fire) (linkSpec, error) {
			return messageSpec(wire.TypeLookupResp, relay.Action{Verb: relay.Hold}), nil
		})
	registerLink(&Kind{Name: CaseAckWithheld, Help: "ack-withheld", LongHelp: "connect_ack withheld (#51504)", Order: 101, Badge: "ACK HELD", Case: OwnCase},
		func(*Fire) (linkSpec, error) {
			return linkSpec{fault: only(relay.ToDecoder, wire.TypeConnectAck, relay.Action{Verb: relay.Hold}), reset: true,
				effect: counted(relay.ToDecoder, wire.TypeConnectAck, relay.Hold)}, nil
		})
	registerLink(&Kind{Name: CaseFetchLost, Help: "fetch-lost", LongHelp: "transfer_done lost (#49820)", Order: 102, Badge: "DROPPING", Case: OwnCase},
		func(*Fire) (linkSpec, error) {
			return messageSpec(wire.TypeTransferDone, relay.Action{Verb: relay.Drop}), nil
		})
	registerLink(&Kind{Name: CaseSlowLink, Help: "slow-link", LongHelp: "latency 100ms±20ms", Order: 103, Badge: "SLOW LINK", Case: OwnCase},
		func(*Fire) (linkSpec, error) {
			return toxicSpec(relay.Toxics{Latency: 100 * time.Millisecond, Jitter: 20 * time.Millisecond}), nil
		})
}

func registerToxics() {
	registerLink(&Kind{Name: ActionLatency, Help: "latency", LongHelp: "latency D±J on the link", Order: 96, Badge: "SLOW LINK", Shapes: true,
		Arg: &Arg{Name: "a latency, as 50ms or 50ms±10ms", Check: func(s string) error { _, _, err := ParseLatency(s); return err }}},
		func(f *Fire) (linkSpec, error) {
			d, j, err := ParseLatency(f.Arg)
			return toxicSpec(relay.Toxics{Latency: d, Jitter: j}), err
		})
	registerLink(&Kind{Name: ActionBandwidth, Help: "bandwidth", LongHelp: "bound the link's bytes/s", Order: 97, Badge: "THROTTLED", Shapes: true,
		Arg: &Arg{Name: "a rate, as 100KB/s or 1MB/s", Check: func(s string) error { _, err := ParseRate(s); return err }}},
		func(f *Fire) (linkSpec, error) {
			r, err := ParseRate(f.Arg)
			return toxicSpec(relay.Toxics{Bandwidth: r}), err
		})
	registerLink(&Kind{Name: ActionReset, Help: "reset", LongHelp: "RST the link's connections", Order: 98, Badge: "RESET"},
		func(*Fire) (linkSpec, error) {
			t := relay.Toxics{ResetNew: true}
			return linkSpec{reset: true, once: true, toxics: &t, effect: func(b, n relay.Counters) (int64, string) {
				k := n.Resets - b.Resets
				return k, fmt.Sprintf("%d connection pairs reset", k)
			}}, nil
		})
	registerLink(&Kind{Name: ActionSlowClose, Help: "slow-close", LongHelp: "pass a close on late", Order: 99, Badge: "SLOW CLOSE",
		Arg: &Arg{Name: "a delay, as 5s", Check: func(s string) error { _, err := parsePositive(s); return err }}},
		func(f *Fire) (linkSpec, error) {
			d, err := parsePositive(f.Arg)
			t := relay.Toxics{SlowClose: d}
			return linkSpec{toxics: &t, effect: func(b, n relay.Counters) (int64, string) {
				k := n.SlowClosed - b.SlowClosed
				return k, fmt.Sprintf("%d closes held %v", k, d)
			}}, err
		})
}

// messageSpec acts a on every message of typ, in the direction it takes.
func messageSpec(typ string, a relay.Action) linkSpec {
	dir := msgDir[typ]
	return linkSpec{fault: only(dir, typ, a), effect: counted(dir, typ, a.Verb)}
}

// toxicSpec puts t on the link's bytes both ways.
func toxicSpec(t relay.Toxics) linkSpec {
	return linkSpec{toxics: &t, effect: func(b, n relay.Counters) (int64, string) {
		k := n.Slowed[relay.ToSource] + n.Slowed[relay.ToDecoder] - b.Slowed[relay.ToSource] - b.Slowed[relay.ToDecoder]
		return k, fmt.Sprintf("%d frames slowed", k)
	}}
}

func msgNames() string {
	names := make([]string, 0, len(msgDir))
	for n := range msgDir {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func parseMsg(s string) (string, error) {
	if _, ok := msgDir[s]; !ok {
		return "", fmt.Errorf("want a message type: %s", msgNames())
	}
	return s, nil
}

func parseMsgDelay(s string) (string, time.Duration, error) {
	typ, d, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, fmt.Errorf("want a message type and a delay, as fetch:2s")
	}
	if _, err := parseMsg(typ); err != nil {
		return "", 0, err
	}
	dur, err := parsePositive(d)
	return typ, dur, err
}

func parsePositive(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 2s, got %q", s)
	}
	return d, nil
}

func checkOptionalDuration(s string) error {
	if s == "" {
		return nil
	}
	_, err := parsePositive(s)
	return err
}

// ParseLatency reads latency's word: "50ms", or "50ms±10ms" ("+-" for
// ±), the jitter no more than the latency.
func ParseLatency(s string) (d, jitter time.Duration, err error) {
	base, j, ok := strings.Cut(strings.ReplaceAll(s, "+-", "±"), "±")
	if d, err = parsePositive(base); err != nil {
		return 0, 0, fmt.Errorf("want a latency such as 50ms or 50ms±10ms")
	}
	if !ok {
		return d, 0, nil
	}
	if jitter, err = time.ParseDuration(j); err != nil || jitter < 0 || jitter > d {
		return 0, 0, fmt.Errorf("want a jitter from 0 to the latency after ±, as 50ms±10ms")
	}
	return d, jitter, nil
}

// ParseRate reads bandwidth's word: a number of bytes per second with
// B/s, KB/s or MB/s (decimal: 1 KB is 1000 bytes).
func ParseRate(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"MB/s", 1e6}, {"KB/s", 1e3}, {"B/s", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil || v <= 0 {
				break
			}
			return v * u.mult, nil
		}
	}
	return 0, fmt.Errorf("want a rate such as 100KB/s or 1MB/s")
}
