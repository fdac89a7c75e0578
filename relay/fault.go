package relay

import (
	"time"

	"p2pfault/sim/wire"
)

// Message is what a fault is asked about: one control message crossing the
// link (a heartbeat never is: it always passes).
type Message struct {
	Pair string
	Dir  Dir
	wire.Summary
}

// Verb is what the link does with a message.
type Verb int

const (
	// Pass relays the message (after the link's toxics).
	Pass Verb = iota
	// Drop loses the message.
	Drop
	// Hold withholds the message until Release (or Discard, Close).
	Hold
	// Delay relays the message Action.Delay later; the messages behind
	// it are not held up.
	Delay
)

func (v Verb) String() string {
	switch v {
	case Pass:
		return "pass"
	case Drop:
		return "drop"
	case Hold:
		return "hold"
	case Delay:
		return "delay"
	}
	return "?"
}

// Action is a fault's answer for one message.
type Action struct {
	Verb  Verb
	Delay time.Duration
}

// Toxics act on every byte through the link, heartbeats included, as a
// slow or lossy network would.
type Toxics struct {
	// Dir limits them to one direction (0: both).
	Dir Dir
	// Latency delays every frame by Latency ± a uniform Jitter, in order
	// (TCP delivers in order: a frame never overtakes the one before).
	Latency, Jitter time.Duration
	// Bandwidth bounds the bytes per second (0: unbounded).
	Bandwidth float64
	// SlowClose delays passing on a side's close (FIN) by that long.
	SlowClose time.Duration
	// ResetNew resets every connection relayed while it is set, as soon
	// as its far side is dialed (a link that keeps breaking).
	ResetNew bool
}

func (t Toxics) on(d Dir) bool { return t.Dir == 0 || t.Dir == d }

func (l *Link) resetNew() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.toxics.ResetNew
}

// Count is what a link did with one type of message in one direction.
type Count struct {
	Passed, Dropped, Held, Delayed, Released int64
}

// Key is a message type in a direction.
type Key struct {
	Dir  Dir
	Type string
}

// Counters are a link's counts since it started.
type Counters struct {
	Messages   map[Key]Count
	Heartbeats map[Dir]int64 // PING and PONG frames relayed
	Unparsed   map[Dir]int64 // messages relayed untouched: not a control message
	Conns      int64         // connections relayed
	Refused    int64         // connections reset because the far engine could not be reached
	Resets     int64         // connection pairs reset by Reset
	Slowed     map[Dir]int64 // frames given a later time by latency or bandwidth
	SlowClosed int64         // closes passed on late by slow-close
}

func newCounters() Counters {
	return Counters{Messages: map[Key]Count{}, Heartbeats: map[Dir]int64{}, Unparsed: map[Dir]int64{}, Slowed: map[Dir]int64{}}
}

// Of is the count of typ in dir.
func (c Counters) Of(dir Dir, typ string) Count { return c.Messages[Key{dir, typ}] }

// Record is one message in the wire trace.
type Record struct {
	At   time.Time
	Pair string
	Dir  Dir
	wire.Summary
	Verb Verb
}

// SetFault sets the function asked about every message (nil: every
// message passes). Messages already withheld stay withheld.
func (l *Link) SetFault(f func(Message) Action) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fault = f
}

// SetToxics replaces the link's toxics (the zero value: none). Bytes
// already queued keep the times they were given.
func (l *Link) SetToxics(t Toxics) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.toxics = t
}

// Counters is a copy of the link's counts.
func (l *Link) Counters() Counters {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts
	c.Messages, c.Heartbeats, c.Unparsed, c.Slowed = map[Key]Count{}, map[Dir]int64{}, map[Dir]int64{}, map[Dir]int64{}
	for k, v := range l.counts.Messages {
		c.Messages[k] = v
	}
	for k, v := range l.counts.Heartbeats {
		c.Heartbeats[k] = v
	}
	for k, v := range l.counts.Unparsed {
		c.Unparsed[k] = v
	}
	for k, v := range l.counts.Slowed {
		c.Slowed[k] = v
	}
	return c
}

// Trace is the last records kept, oldest first.
func (l *Link) Trace() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Record, 0, len(l.trace))
	out = append(out, l.trace[l.traceAt:]...)
	return append(out, l.trace[:l.traceAt]...)
}

func (l *Link) count(f func(*Counters)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f(&l.counts)
}

// heldMsg is a withheld message and the direction that will carry it.
type heldMsg struct {
	s   *session
	dir Dir
	key Key
	b   []byte
}

// decide asks the fault about a message, counts and records it.
func (l *Link) decide(m Message) Action {
	l.mu.Lock()
	a := Action{}
	if l.fault != nil {
		a = l.fault(m)
	}
	k := Key{m.Dir, m.Type}
	c := l.counts.Messages[k]
	switch a.Verb {
	case Pass:
		c.Passed++
	case Drop:
		c.Dropped++
	case Hold:
		c.Held++
	case Delay:
		c.Delayed++
	}
	l.counts.Messages[k] = c
	r := Record{At: time.Now(), Pair: l.cfg.Name, Dir: m.Dir, Summary: m.Summary, Verb: a.Verb}
	if len(l.trace) < l.cfg.TraceKeep {
		l.trace = append(l.trace, r)
	} else {
		l.trace[l.traceAt] = r
		l.traceAt = (l.traceAt + 1) % len(l.trace)
	}
	trace := l.cfg.Trace
	l.mu.Unlock()
	if trace != nil {
		trace(r)
	}
	return a
}

// hold keeps b for Release; past HoldMax the oldest is dropped.
func (l *Link) hold(h heldMsg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) >= l.cfg.HoldMax {
		old := l.held[0]
		l.held = l.held[1:]
		c := l.counts.Messages[old.key]
		c.Dropped++
		l.counts.Messages[old.key] = c
	}
	l.held = append(l.held, h)
}

// Release relays every withheld message now, in the order withheld, on
// the connections that carried them (those since closed lose theirs), and
// returns how many it relayed.
func (l *Link) Release() int {
	l.mu.Lock()
	held := l.held
	l.held = nil
	for _, h := range held {
		c := l.counts.Messages[h.key]
		c.Released++
		l.counts.Messages[h.key] = c
	}
	l.mu.Unlock()
	n := 0
	for _, h := range held {
		if h.s.flow(h.dir).enqueue(h.b, time.Now(), false) {
			n++
		}
	}
	return n
}

// Discard drops every withheld message and returns how many.
func (l *Link) Discard() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.held)
	for _, h := range l.held {
		c := l.counts.Messages[h.key]
		c.Dropped++
		l.counts.Messages[h.key] = c
	}
	l.held = nil
	return n
}

// due is when bytes read now in dir go out under the toxics, given when
// the previous ones went (last) and when the link is busy until under
// its bandwidth (busy); it returns the new busy.
func (l *Link) due(dir Dir, n int, last, busy time.Time) (at, busyUntil time.Time) {
	l.mu.Lock()
	t := l.toxics
	var jitter time.Duration
	if t.on(dir) && t.Jitter > 0 {
		jitter = time.Duration(l.rng.Int64N(int64(2*t.Jitter)+1)) - t.Jitter
	}
	if t.on(dir) && (t.Latency > 0 || t.Bandwidth > 0) {
		l.counts.Slowed[dir]++
	}
	l.mu.Unlock()
	at = time.Now()
	if !t.on(dir) {
		return maxTime(at, last), busy
	}
	at = at.Add(max(t.Latency+jitter, 0))
	at = maxTime(at, last)
	if t.Bandwidth > 0 {
		busy = maxTime(busy, at).Add(time.Duration(float64(n) / t.Bandwidth * float64(time.Second)))
		at = busy
	}
	return at, busy
}

func (l *Link) slowClose(dir Dir) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.toxics.on(dir) {
		return l.toxics.SlowClose
	}
	return 0
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
