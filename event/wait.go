package event

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Wait is what the decoder's pulls naming a peer wait on, as its log
// says (package cause reads the lines): a wait begins (Open) when a line
// says what the pulls now wait on and until when, and ends when a line
// says it is over (the session ready, or reaped). Only the waits a log
// line names: a pull waiting on a frozen peer's lookup has no line until
// the reap, and then no wait is shown.
type Wait struct {
	Peer string `json:"peer"` // the P2P address the pulls name (Sample.Peer)
	// What is the wait, by the cause it ends in when its timer runs out
	// (CauseHandshake: a new session awaiting its connect_ack).
	What  Cause         `json:"what"`
	Open  bool          `json:"open"`
	Since time.Duration `json:"since_ns"` // since t0: when the wait began
	// Timer is the setting that bounds the wait and its value (nil: the
	// line did not say).
	Timer *Timer `json:"timer,omitempty"`
}

// WaitAge is how long a pull must have been in flight to count among
// those waiting on a wait: a younger one may be a local prefill beside it
// (#64501's arm prefills at once while a handshake is pending), as long
// as a prefill of a few hundred tokens takes, tens of milliseconds.
const WaitAge = 100 * time.Millisecond

// Holds says whether a pull started at start and in flight at now counts
// among those waiting on w.
func (w Wait) Holds(start, now time.Duration) bool { return now-start >= WaitAge }

// waitWords are the words for what a wait is, before "with PEER".
var waitWords = map[Cause]string{CauseHandshake: "handshake"}

// Words is what the wait is, in the words the faces print ("handshake").
func (w Wait) Words() string {
	if what := waitWords[w.What]; what != "" {
		return what
	}
	return string(w.What)
}

// Deadline is when since t0 the wait's timer runs out (false: the line
// did not say its timer).
func (w Wait) Deadline() (time.Duration, bool) {
	if w.Timer == nil {
		return 0, false
	}
	return w.Since + w.Timer.Value, true
}

// InFlightWords is the line of n pulls in flight that wait on w:
// "in flight 18: handshake with 127.0.0.1:7777 since 22.0 s (deadline 30 s)".
func (w Wait) InFlightWords(n int) string {
	s := fmt.Sprintf("in flight %d: %s with %s since %.1f s", n, w.Words(), w.Peer, w.Since.Seconds())
	if w.Timer != nil {
		s += " (deadline " + strconv.FormatFloat(math.Round(w.Timer.Value.Seconds()*10)/10, 'f', -1, 64) + " s)"
	}
	return s
}
