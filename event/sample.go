package event

import "time"

// Sample is one trial of the probe (package probe): a unique prompt seeded on a source, then pulled into
// the decoder with remote_kv_source naming that source (mode p2p), or its
// prefill leg on the source and its decode leg on the decoder with
// remote_prefiller naming it (mode pd: the seed fields are the prefill
// leg's, the pull's the decode leg's). Times are relative
// to the run's t0 (the end of warm-up); they are wall-clock durations, never
// scaled.
type Sample struct {
	Source int   `json:"source"` // index of the source the pull names
	Trial  int64 `json:"trial"`  // per-run sequence number, unique across sources
	// Rank is the data-parallel rank of the source the trial was pinned to
	// (its seed's X-data-parallel-rank, its pull's remote_port base+Rank);
	// 0 on a source of one rank (RunInfo.SourceRanks says which have more).
	Rank int `json:"rank,omitempty"`
	// Late is how long after its slot the trial was sent, when
	// probe.LateAfter or more: p2pfault itself was behind (a loaded
	// machine, a cluster too large for its cores), so its latency
	// measures p2pfault's lag too; 0 (absent) when on time.
	Late time.Duration `json:"late_ns,omitempty"`
	// Decoder is the index of the decoder the pull went to (--decoders:
	// the probe spreads trials over them); 0 in a cluster of one.
	Decoder int `json:"decoder,omitempty"`

	// Seed leg (POST to the source itself).
	SeedStatus  int           `json:"seed_status"` // HTTP status; 0 when no response
	SeedLatency time.Duration `json:"seed_latency_ns"`
	SeedErr     string        `json:"seed_error,omitempty"`

	// Pull leg (POST to the decoder naming the source).
	Start time.Duration `json:"start_ns"` // when the pull was sent, since t0
	// Peer is the P2P address the pull named (remote_host:remote_port of
	// its remote_kv_source or remote_prefiller); "" for a trial not sent.
	Peer         string        `json:"peer,omitempty"`
	Latency      time.Duration `json:"latency_ns"` // client-side, until the body was read or the error
	Status       int           `json:"status"`     // HTTP status; 0 when no response
	PromptTokens int           `json:"prompt_tokens"`
	CachedTokens int           `json:"cached_tokens"`
	ServiceTime  time.Duration `json:"service_ns,omitempty"` // X-Sim-Service-Time reported by the sim, if any
	// TTFT (--stream): from sending the pull until its first token's event
	// arrived; 0 when not streamed or no token came.
	TTFT time.Duration `json:"ttft_ns,omitempty"`
	Err  string        `json:"error,omitempty"`
	// Aborted: the pull was still in flight when the run ended early (q,
	// Ctrl-C, SIGTERM) and was cut short, so the decoder never answered and
	// Latency is how long it had waited: the checks judge it as a pull in
	// flight of that age (past a bound it has failed it; under every bound
	// it fails none). A trial seeding when the run ended has its pull not
	// sent: Aborted, Err "not sent: ...", and no pull_start.
	Aborted bool `json:"aborted,omitempty"`
	// KVRequestID is the pull's kv_request_id (p2p: its own; pd: the
	// trial's, shared with the prefill leg): the id vLLM's log lines name.
	KVRequestID string `json:"kv_request_id,omitempty"`

	// Cause is what ended the pull and Timer the setting behind it with its
	// value in this run (nil when no timer explains it), computed once by
	// the experiment as the pull ends (package cause); "" in streams
	// written before causes.
	Cause Cause  `json:"cause,omitempty"`
	Timer *Timer `json:"timer,omitempty"`
	// ByWire: no engine line explained the pull and Cause was read from
	// the link's messages (a run with --link, package cause's wire.go).
	ByWire bool `json:"by_wire,omitempty"`

	// Content (--content-tokens > 0): the pull's text beside the source's
	// own greedy completion of the same prompt. Content is ContentSame or
	// ContentDiffers when both answered 200 with a text, "" when there was
	// nothing to compare. The texts are kept only when they differ: equal
	// texts match under every rule (check.ContentRule), so they add
	// nothing, and a long run's samples stay small.
	Content    Content `json:"content,omitempty"`
	PullText   string  `json:"pull_text,omitempty"`
	SourceText string  `json:"source_text,omitempty"`
}

// Content is what came of comparing a pull's text with its source's own.
type Content string

// Outcomes of the comparison, byte for byte; whether a difference is a
// mismatch is the content rule's call (check.ContentRule.Wrong).
const (
	ContentSame    Content = "same"
	ContentDiffers Content = "differs"
)

// Hit reports whether the pull came back 200 with cached tokens: every
// prompt is unique, so cached tokens can only have come over P2P.
func (s Sample) Hit() bool { return s.Status == 200 && s.CachedTokens > 0 }

// End is when the pull finished, since t0.
func (s Sample) End() time.Duration { return s.Start + s.Latency }

// PullStart says that a pull was sent and has not ended yet: what a face
// needs to show a pull while it hangs (a stalled source's pulls end only
// when it resumes or a timeout fires, and until then a face that sees only
// Samples is blind). The Sample that ends it carries the same Trial.
type PullStart struct {
	Source int `json:"source"`         // index of the source the pull names
	Rank   int `json:"rank,omitempty"` // its data-parallel rank (Sample.Rank)
	// Decoder is the decoder the pull is sent to (Sample.Decoder).
	Decoder int           `json:"decoder,omitempty"`
	Trial   int64         `json:"trial"` // the id of the trial: its Sample has the same
	Start   time.Duration `json:"start_ns"`
	Peer    string        `json:"peer,omitempty"` // the P2P address the pull names (Sample.Peer)
}
