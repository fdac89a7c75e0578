// Package engine is the simulated engine core: the scheduler loop that ticks
// every few milliseconds, the KV tiers, and the P2P sessions with peers. All
// P2P work (accepting connects, answering lookups and fetches, deadlines,
// heartbeats) happens on ticks, so a frozen engine answers nothing, which is
// what makes a SIGSTOPped source look to its peers as it does in vLLM.
package engine

import (
	"errors"
	"fmt"
	"time"

	"p2pfault/netenv"
	"p2pfault/sim/kv"
	"p2pfault/sim/wire"
)

// PendingMode is what a request does when it meets a P2P session whose
// handshake is still pending.
type PendingMode int

const (
	// PendingWait re-polls every tick until the handshake ends (vLLM main).
	PendingWait PendingMode = iota
	// PendingPrefill misses at once and prefills locally (vLLM PR #64501).
	PendingPrefill
)

func (m PendingMode) String() string {
	if m == PendingPrefill {
		return "prefill"
	}
	return "wait"
}

// LookupDeadline is what ends a lookup a ready session's peer never
// answers (MODEL.md mechanism 3): three builds of vLLM differ here.
type LookupDeadline int

const (
	// LookupSilence reaps the session when lookups wait and the peer has
	// said nothing (no message, no heartbeat PONG) for the lookup timeout,
	// or when one lookup has waited that long: the seed's build, whose
	// "8 s lookup timeout" ends its in-flight stall pull at 7.08 s.
	LookupSilence LookupDeadline = iota
	// LookupNone never ends a lookup: vLLM main (session/client.py
	// @099ef822, "There is no timeout … an unanswered probe simply stays
	// None" until finish_request). Against a peer whose heartbeats flow
	// the request waits until its client gives up (#56823).
	LookupNone
	// LookupProgress is #56836's progress deadline: a request whose lookup
	// has gone unanswered for the lookup timeout since it was sent (heartbeats
	// do not count) marks the whole peer session dead, and the teardown
	// turns its waiting lookups into misses.
	LookupProgress
)

// LookupDeadlines are the --sim-lookup-deadline values, in order.
var LookupDeadlines = []string{"silence", "none", "progress"}

func (d LookupDeadline) String() string { return LookupDeadlines[d] }

// ParseLookupDeadline reads a --sim-lookup-deadline value.
func ParseLookupDeadline(s string) (LookupDeadline, bool) {
	for i, n := range LookupDeadlines {
		if n == s {
			return LookupDeadline(i), true
		}
	}
	return 0, false
}

// LoadFailurePolicy is vLLM's kv_load_failure_policy: what a request does
// when a fetch from a peer fails after the lookup hit.
type LoadFailurePolicy int

const (
	// PolicyFail fails the request (vLLM's default).
	PolicyFail LoadFailurePolicy = iota
	// PolicyRecompute prefills the blocks locally instead.
	PolicyRecompute
)

func (p LoadFailurePolicy) String() string {
	if p == PolicyRecompute {
		return "recompute"
	}
	return "fail"
}

// DeadSessionLoads is what a consumer does with the loads in flight on a
// session reaped for silence (its heartbeat or lookup deadline): the peer
// may still be writing them (MODEL.md mechanism 29).
type DeadSessionLoads int

const (
	// DeadLoadsFail fails them with the session (session/session.py
	// P2PSession.close returns them as failed_jobs, read at 0577fc22).
	DeadLoadsFail DeadSessionLoads = iota
	// DeadLoadsTimeout keeps them to their load timeout and the abort-ack
	// timeout after it, as the build of vLLM issue #56828 did.
	DeadLoadsTimeout
)

func (m DeadSessionLoads) String() string {
	if m == DeadLoadsTimeout {
		return "timeout"
	}
	return "fail"
}

// Config is one engine core's configuration. Durations are already scaled
// by the sim's time scale.
type Config struct {
	Model           string
	BlockSize       int // tokens per KV block
	TPSize          int // tensor-parallel size: part of the fingerprint
	KVBytesPerToken int
	HashSeed        string // PYTHONHASHSEED (resolved: never empty)
	GPUBlocks       int    // GPU prefix cache capacity
	CPUBlocks       int    // CPU offload tier capacity

	P2P     bool   // a p2p secondary tier is configured
	P2PHost string // bind address and identity host, used verbatim
	P2PPort int    // 0 picks a free port

	PendingHandshake PendingMode
	LookupDeadline   LookupDeadline
	LoadFailure      LoadFailurePolicy
	DeadSessionLoads DeadSessionLoads

	HandshakeTimeout  time.Duration // VLLM_P2P_HANDSHAKE_TIMEOUT_S
	LookupTimeout     time.Duration // consumer deadline on a lookup_resp (LookupDeadline says how it counts)
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration // silence after a ping that kills a session
	LookupHold        time.Duration // producer hold on a block still being computed
	LoadTimeout       time.Duration // fetch → transfer_done, then abort
	AbortAckTimeout   time.Duration // abort_fetch → abort_ack, then the load fails
	// StoreTimeout is vLLM's _STORE_TIMEOUT_S (session/server.py): a store
	// job (a lookup hit's pin, a PD store bound to a fetch) not transferred
	// within it fails and its blocks are released. 0 means 30 s.
	StoreTimeout time.Duration
	// UnboundStoreTimeout is the p2p tier's unbound_store_timeout_s
	// (manager.py, #53453): a PD store no fetch has bound within it is
	// reaped and its kv_request_id failed. 0 means 60 s.
	UnboundStoreTimeout time.Duration

	// PrefillPerToken is the compute cost of one token a step schedules
	// (sched.go); DecodePerToken the shortest step that decodes. Not
	// scaled: compute costs.
	PrefillPerToken time.Duration
	DecodePerToken  time.Duration
	// AttentionContext is the context, in tokens, at which a token's
	// attention costs as much as the rest of its forward pass: a token at
	// position p costs PrefillPerToken × (1 + p/AttentionContext)
	// (sched.go). 0: no attention term.
	AttentionContext int
	// RegisterPerBlock is what registering a peer's NIXL agent costs the
	// scheduler loop per CPU block it describes (producer.go onConnect,
	// consumer.go on connect_ack). Not scaled: CPU work.
	RegisterPerBlock time.Duration
	// MaxNumBatchedTokens is vLLM's --max-num-batched-tokens, the token
	// budget of one step. 0 means DefaultMaxNumBatchedTokens.
	MaxNumBatchedTokens int
	TransferBandwidth   float64 // bytes per second of a peer-to-peer transfer

	Tick       time.Duration // scheduler step period
	FreezeGap  time.Duration // a gap between steps over this means the process was frozen
	StaleRoute bool          // model the ZMQ router's stale-connection gap

	StatsInterval time.Duration // period of the stats log line; 0 turns it off

	Defects Defects // modelled engine bugs, all off by default

	// Net is where the P2P tier listens and dials; nil is the OS's network.
	// An in-process engine (sim.StartInProcess) runs each core on a memnet.Host
	// of its own (the front end's HTTP listener on another).
	Net netenv.Network `json:"-"`
	// Gate, when set, is called by each of the engine's goroutines after a
	// wake-up that is not I/O on Net (its scheduler tick, a retry timer) and
	// blocks while the engine's process is frozen, so an in-process engine
	// stops at its next step as under SIGSTOP (memnet.Host.Wait). A real
	// process needs none: the kernel stops it.
	Gate func() `json:"-"`

	// withhold, in tests, drops each message a consumer's peer sent for
	// which it returns true before the consumer reads it, as a link
	// between them withholding it (p2pfault's mute: the half-open peer).
	withhold func(wire.Message) bool
	// holdLoss, in tests, delays each Disconnected event on its way to
	// the loop: the order in which a loss and a message sent after it
	// meet the loop must not decide what the engine does.
	holdLoss func()
}

// Defects are engine bugs the sim can model, each after a cited vLLM bug, so
// that a content check can be shown to catch them. Each changes nothing
// until its trigger happens (MODEL.md, "Defects").
type Defects struct {
	// ReuseFreedBlocks: a source that frees a pinned or parked block on a
	// timeout returns its slot to the allocator at once but keeps serving
	// the block from that slot to a later fetch, so the fetch gets whatever
	// was written there since (vllm#21570: a prefiller's timeout freed
	// blocks the decoder then read).
	ReuseFreedBlocks bool `json:"reuse_freed_blocks,omitempty"`
	// RecomputeKeepsPartial: a load that fails and falls back to recompute
	// keeps the blocks it had placed for the load as if they had landed,
	// whatever their slots hold — another request's KV — and the recompute
	// skips them (vllm#49250).
	RecomputeKeepsPartial bool `json:"recompute_keeps_partial,omitempty"`
	// LeakUnboundStores: a PD producer never reaps a parked store no
	// fetch binds, so its blocks stay pinned for good: the leak
	// manager.py's _reap_unbound_stores exists to prevent ("Protects
	// against the prefiller buffering blocks for a decoder that never
	// asks (decoder died, network partition, lost kv_request_id)").
	LeakUnboundStores bool `json:"leak_unbound_stores,omitempty"`
}

// vLLM's defaults of the timeouts a zero Config field stands for.
const (
	DefaultStoreTimeout        = 30 * time.Second
	DefaultUnboundStoreTimeout = 60 * time.Second
)

// withDefaults fills the zero fields that have a vLLM default.
func (c Config) withDefaults() Config {
	if c.StoreTimeout == 0 {
		c.StoreTimeout = DefaultStoreTimeout
	}
	if c.UnboundStoreTimeout == 0 {
		c.UnboundStoreTimeout = DefaultUnboundStoreTimeout
	}
	if c.MaxNumBatchedTokens == 0 {
		c.MaxNumBatchedTokens = DefaultMaxNumBatchedTokens
	}
	return c
}

// BlockBytes is the size of one KV block: vLLM's block_len.
func (c Config) BlockBytes() int64 { return int64(c.BlockSize) * int64(c.KVBytesPerToken) }

// Fingerprint is what peers must agree on to exchange blocks.
func (c Config) Fingerprint() string {
	return kv.Fingerprint(c.Model, c.BlockSize, c.TPSize, c.KVBytesPerToken)
}

// Validate reports the first field that would make the engine misbehave.
func (c Config) Validate() error {
	var errs []error
	positive := func(name string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s %d must be positive", name, v))
		}
	}
	positiveDur := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %s must be positive", name, d))
		}
	}
	nonNegDur := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %s must not be negative", name, d))
		}
	}
	if c.Model == "" {
		errs = append(errs, errors.New("model is empty"))
	}
	if c.HashSeed == "" {
		errs = append(errs, errors.New("hash seed is empty"))
	}
	positive("block size", c.BlockSize)
	positive("tensor-parallel size", c.TPSize)
	positive("KV bytes per token", c.KVBytesPerToken)
	if c.MaxNumBatchedTokens < 0 {
		errs = append(errs, fmt.Errorf("max num batched tokens %d must not be negative", c.MaxNumBatchedTokens))
	}
	if c.GPUBlocks < 0 || c.CPUBlocks < 0 {
		errs = append(errs, fmt.Errorf("cache capacities %d/%d must not be negative", c.GPUBlocks, c.CPUBlocks))
	}
	if c.P2P && (c.P2PPort < 0 || c.P2PPort > 65535) {
		errs = append(errs, fmt.Errorf("P2P port %d out of range", c.P2PPort))
	}
	positiveDur("handshake timeout", c.HandshakeTimeout)
	positiveDur("lookup timeout", c.LookupTimeout)
	positiveDur("heartbeat interval", c.HeartbeatInterval)
	positiveDur("heartbeat timeout", c.HeartbeatTimeout)
	positiveDur("lookup hold", c.LookupHold)
	positiveDur("load timeout", c.LoadTimeout)
	positiveDur("abort-ack timeout", c.AbortAckTimeout)
	nonNegDur("store timeout", c.StoreTimeout)
	nonNegDur("unbound store timeout", c.UnboundStoreTimeout)
	positiveDur("tick", c.Tick)
	positiveDur("freeze gap", c.FreezeGap)
	nonNegDur("stats interval", c.StatsInterval)
	nonNegDur("prefill cost per token", c.PrefillPerToken)
	nonNegDur("decode cost per token", c.DecodePerToken)
	nonNegDur("registration cost per block", c.RegisterPerBlock)
	if c.AttentionContext < 0 {
		errs = append(errs, fmt.Errorf("attention context %d must not be negative", c.AttentionContext))
	}
	if !(c.TransferBandwidth > 0) {
		errs = append(errs, fmt.Errorf("transfer bandwidth %g must be positive", c.TransferBandwidth))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine config: %w", err)
	}
	return nil
}

// transferTime is how long the producer takes to write n bytes; the network
// round trip of fetch and transfer_done adds the RTT on top.
func (c Config) transferTime(n int64) time.Duration {
	return time.Duration(float64(n) / c.TransferBandwidth * float64(time.Second))
}
