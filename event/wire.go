package event

import "strings"

// WireMsg is one control message a link (package relay, --link) saw
// between a decoder and a source rank: the wire trace, as evidence. The
// cause tracker reads it where the engines' logs say nothing (vLLM logs
// neither the handshake wait nor an unanswered lookup) and `report
// --ladder` draws the slowest pulls' messages from it. ZMTP heartbeats are
// not messages: the link counts them and passes them unrecorded.
type WireMsg struct {
	// Pair is the link's name, as the timeline names it
	// ("source-0", "decoder-1>source-0/rank1").
	Pair   string `json:"pair"`
	Source int    `json:"source"`
	// Peer is the address the pulls through this link name (the link's
	// own, Sample.Peer), so a message is matched to its pulls.
	Peer string `json:"peer"`
	// Dir is "decoder>source" or "source>decoder".
	Dir string `json:"dir"`
	// Type is the message's type (connect, connect_ack, lookup,
	// lookup_resp, fetch, transfer_done, abort_fetch, abort_ack,
	// disconnect).
	Type        string `json:"type"`
	KVRequestID string `json:"kv_request_id,omitempty"`
	Keys        int    `json:"keys,omitempty"` // the blocks asked about or fetched
	Hits        int    `json:"hits,omitempty"` // lookup_resp: the hits that are true
	// Verb is what the link's fault did with it: "" passed, or "drop",
	// "hold" (withheld until the fault is undone), "delay".
	Verb string `json:"verb,omitempty"`
}

// The directions of WireMsg.Dir.
const (
	WireToSource  = "decoder>source"
	WireToDecoder = "source>decoder"
)

// Withheld says the message did not pass when it was sent (dropped or
// held: a delayed one still arrives).
func (w WireMsg) Withheld() bool { return w.Verb == "drop" || w.Verb == "hold" }

// PullID is the kv_request_id of the pull a wire message's belongs to:
// the sim suffixes the pull's with "#N" (one per request of the pull,
// sim/engine/request.go), vLLM sends the pull's own.
func (w WireMsg) PullID() string {
	id := w.KVRequestID
	if i := strings.LastIndexByte(id, '#'); i > 0 {
		return id[:i]
	}
	return id
}

// LinkCounts is what one link (one decoder ↔ source rank pair) did since
// it started, as its own counters say: the control messages it passed,
// withheld, dropped and delayed (both ways), and the ZMTP heartbeats it
// relayed, which no wire event records.
type LinkCounts struct {
	Pair       string `json:"pair"` // as WireMsg.Pair
	Source     int    `json:"source"`
	Passed     int64  `json:"passed"`
	Withheld   int64  `json:"withheld"`
	Dropped    int64  `json:"dropped"`
	Delayed    int64  `json:"delayed"`
	Heartbeats int64  `json:"heartbeats"`
}
