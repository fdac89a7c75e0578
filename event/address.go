package event

import (
	"fmt"
	"time"
)

// Modes of a run: which leg of the tier a trial exercises (RunInfo.Mode).
const (
	// ModeP2P: seed the prompt on the source, then pull it into the
	// decoder with remote_kv_source naming the source (the seed's slice).
	ModeP2P = "p2p"
	// ModePD: the prefill leg on the source (remote_decoder), then the
	// decode leg on the decoder (remote_prefiller naming the source), one
	// kv_request_id for both, as vLLM's p2p_connector_proxy.py does.
	ModePD = "pd"
)

// ModeOf is a run's mode, "" (a stream from before modes) read as p2p.
func ModeOf(mode string) string {
	if mode == "" {
		return ModeP2P
	}
	return mode
}

// CheckMode is nil for a mode p2pfault knows (ModeOf: "" is p2p), else
// `mode "x": want p2p or pd`: the one test of a mode, wherever one is
// given (a flag, an attach file, a Config); a caller may word the refusal
// its own way.
func CheckMode(mode string) error {
	switch ModeOf(mode) {
	case ModeP2P, ModePD:
		return nil
	}
	return fmt.Errorf("mode %q: want %s or %s", mode, ModeP2P, ModePD)
}

// AddressInfo is the address the probe names a source by, from the
// event's time on: once for every source when the probe is made, and
// again when the source was replaced by an engine on new ports (fault
// kind replace). From At on no pull names any other address for the
// source: a pull whose Sample.Start (or PullStart.Start) is at or after
// At names P2P.
type AddressInfo struct {
	Source int    `json:"source"`
	URL    string `json:"url"` // the source's HTTP base URL: seeds and prefill legs go there
	P2P    string `json:"p2p"` // remote_host:remote_port of every pull naming the source
	// Prev is the P2P address the probe named before, "" for the first.
	Prev string `json:"prev,omitempty"`
	// At is when the probe switched, since t0 (0 before t0: warm-up).
	At time.Duration `json:"at_ns"`
}
