package cause

import (
	"regexp"
	"time"

	"p2pfault/event"
)

// What the decoder's pulls wait on while they are in flight, from the
// lines that open and close a wait (event.Wait). The faces pair a wait
// with the pulls in flight naming its peer.
var (
	// The sim's line as a new session's connect goes out (vLLM's
	// manager.py _get_or_create_session logs none, so on vLLM no
	// handshake wait is named): sim/engine/consumer.go onDialed.
	reAwaitAck = regexp.MustCompile(`P2PSession (\S+): connect sent, awaiting connect_ack \(handshake timeout ([0-9.]+)s, session opened ([0-9.]+)s ago\)`)
	// The sim's line on connect_ack ("peer %s connected", with the count
	// of refused connects after it).
	reReady = regexp.MustCompile(`peer (\S+) connected`)
)

// WaitOf is the wait a decoder line read at since t0 begins or ends, if
// it names one: a session's connect sent opens a handshake wait (since
// the session opened, its deadline the handshake timeout); the session
// ready, its handshake timed out or its peer down ends it.
func WaitOf(at time.Duration, line string) (event.Wait, bool) {
	if m := reAwaitAck.FindStringSubmatch(line); m != nil {
		return event.Wait{Peer: m[1], What: event.CauseHandshake, Open: true, Since: max(at-seconds(m[3]), 0),
			Timer: &event.Timer{Name: TimerHandshake, Value: seconds(m[2])}}, true
	}
	for _, re := range []*regexp.Regexp{reReady, reHandshake, rePeerDown} {
		if m := re.FindStringSubmatch(line); m != nil {
			return event.Wait{Peer: m[1], What: event.CauseHandshake, Since: at}, true
		}
	}
	return event.Wait{}, false
}
