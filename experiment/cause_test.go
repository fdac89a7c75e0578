package experiment

import (
	"testing"
	"time"

	"p2pfault/cause"
	"p2pfault/event"
)

// TestAttributeHoldsAMissForItsLine: a miss that ended within the skew is
// held for the next batch (the line that explains it may still be in its
// pipe), then named by that line; a hit is sent at once; the final batch
// sends everything.
func TestAttributeHoldsAMissForItsLine(t *testing.T) {
	e := &Experiment{cfg: Config{TimeScale: 1, PullTimeout: time.Minute}}
	e.evidence = &evidence{causes: cause.New(cause.Config{AtOnce: 2 * time.Second, PullTimeout: time.Minute})}
	const peer = "127.0.0.1:7777"
	missed := event.Sample{Source: 0, Trial: 1, Peer: peer, Start: 11 * time.Second, Latency: 11 * time.Second, Status: 200}
	hit := event.Sample{Source: 1, Trial: 2, Start: 21900 * time.Millisecond, Latency: 20 * time.Millisecond, Status: 200, CachedTokens: 384}

	send, hold := e.attribute([]event.Sample{missed, hit}, 22*time.Second+100*time.Millisecond, false)
	if len(send) != 1 || send[0].Trial != 2 || send[0].Cause != event.CauseP2P {
		t.Fatalf("sent %+v, want the hit, pulled over P2P", send)
	}
	if len(hold) != 1 || hold[0].Trial != 1 {
		t.Fatalf("held %+v, want the miss", hold)
	}
	// Its line comes, read just after the answer.
	e.evidence.causes.Log(22*time.Second+200*time.Millisecond, true, "P2P 127.0.0.1:7000: peer "+peer+" down: heartbeat timed out after 10.0s")
	send, hold = e.attribute(hold, 22*time.Second+700*time.Millisecond, false)
	if len(hold) != 0 || len(send) != 1 || send[0].Cause != event.CauseHeartbeat || send[0].Timer == nil || send[0].Timer.Value != 10*time.Second {
		t.Fatalf("second batch sent %+v held %+v, want the miss named by the heartbeat", send, hold)
	}
	// The final batch holds nothing, even a miss that just ended.
	late := missed
	late.Trial, late.Start = 3, 30*time.Second
	send, hold = e.attribute([]event.Sample{late}, 41*time.Second, true)
	if len(hold) != 0 || len(send) != 1 || send[0].Cause != event.CauseUnknown {
		t.Fatalf("final batch sent %+v held %+v, want the unexplained slow miss sent as unknown", send, hold)
	}
}
