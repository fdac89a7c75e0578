package fault

import (
	"fmt"
	"strconv"

	"p2pfault/event"
)

// Action is one fault to take: a kind, the source it acts on and its
// options. Each edge that asks for a fault makes one, once: a dashboard
// key (its kind and the selected source), a timeline line (Parse, Preset)
// and a nemesis draw (Nemesis.Schedule). From there to the target the
// kind travels as the value it was registered as: nobody turns it back
// into its name to look it up again.
type Action struct {
	Kind   *Kind
	Source int
	// Grain is what of the source it acts on: the whole engine (the zero
	// value) or one data-parallel rank's engine core.
	Grain
	Options
}

// String is the action as a message names it: "stall source-0",
// "stall source-0/rank1".
func (a Action) String() string { return a.Kind.Name + " " + a.TargetName() }

// TargetName is what the action acts on: "source-0", "source-0/rank1" or
// "decoder-1".
func (a Action) TargetName() string {
	if a.Pair {
		return PairName(a.Source, a.Peer)
	}
	if a.Decoder {
		return DecoderTarget(a.Source)
	}
	return event.TargetName(a.Source, a.Grain.RankOr())
}

// PairName is the link between source s and decoder d as a target:
// "source-0 from decoder-1", as the timeline writes it.
func PairName(s, d int) string { return event.SourceName(s) + " from " + DecoderTarget(d) }

// DecoderTarget is decoder d's name as a fault target: "decoder-d", in a
// run of one decoder too (the timeline takes "decoder" for decoder-0), so
// one spelling names it in every fault event and window.
func DecoderTarget(d int) string { return "decoder-" + strconv.Itoa(d) }

// EngineWide is the warning an action on one rank that ends the whole
// engine gives (a kind of RankEngine: kill, remove), so nobody reads it as
// a rank restarting alone; "" for any other action.
func (a Action) EngineWide() string {
	if !a.OnRank || a.Kind.Ranks != RankEngine {
		return ""
	}
	return fmt.Sprintf("%s %s: vLLM shuts the whole engine down when one engine core dies "+
		"(core_client.py: \"Engine core proc EngineCore_DP%d died unexpectedly, shutting down client\"), so all of %s goes",
		a.Kind.Name, a.TargetName(), a.Rank, event.SourceName(a.Source))
}

// Grain is what of a source a fault acts on: the whole engine (every
// member: its front end and all its engine cores; the zero value) or one
// data-parallel rank's engine core (OnRank); or, with Decoder, that the
// target is not a source at all but the decoder of the action's index
// (`stall decoder-1`): a decoder is an engine with a session like a
// source, so the kinds act on it as they do on one (issue #41).
type Grain struct {
	OnRank  bool
	Rank    int  // with OnRank: the rank
	Decoder bool // the action's index names a decoder (never with OnRank)
	// Pair: the action acts on the link between the source of its index
	// and decoder Peer alone (`partition source-0 from decoder-1`),
	// leaving every other pair untouched (kinds with Pairs).
	Pair bool
	Peer int
}

// RankOr is the rank, or -1 for the whole engine (event.TargetName's
// spelling).
func (g Grain) RankOr() int {
	if !g.OnRank {
		return -1
	}
	return g.Rank
}

// OneRank is the grain of rank r alone.
func OneRank(r int) Grain { return Grain{OnRank: true, Rank: r} }
