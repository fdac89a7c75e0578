package probe

import (
	"github.com/google/uuid"

	"p2pfault/event"
)

// strategy is how a trial's two legs look in one mode (Config.Mode): the
// first leg's body, sent to the source, and the kv_transfer_params block
// of the pull, sent to the decoder naming that source. Both legs start
// from the same prefix, `{"model":M,"prompt":[ids],"max_tokens":N,
// "temperature":0` with no closing brace (N: Config.ContentTokens, or 1).
type strategy interface {
	// seed completes the first leg's body; id is the trial's kv_request_id.
	seed(prefix []byte, id string) []byte
	// pullHead opens the pull's kv_transfer_params block, up to the
	// opening quote of its kv_request_id.
	pullHead() string
	// pullID is the pull's kv_request_id, given the trial's.
	pullID(id string) string
	// requestID is the X-Request-Id header of both legs ("" for none).
	requestID(id string) string
}

// p2pMode is the seed's slice (reference §2): a plain completion seeds the
// source, then a pull with remote_kv_source names it, with a fresh
// kv_request_id of its own (a per-pull transaction id: seed and pull are
// tied by their tokens, not by an id), as vLLM's proxy does with --p2p.
type p2pMode struct{}

func (p2pMode) seed(prefix []byte, _ string) []byte { return append(prefix, '}') }
func (p2pMode) pullHead() string {
	return `,"kv_transfer_params":{"remote_kv_source":{"kv_request_id":"`
}
func (p2pMode) pullID(string) string    { return uuid.NewString() }
func (p2pMode) requestID(string) string { return "" }

// pdMode is vLLM's proxy in its default (PD) mode, prefiller first
// (p2p_connector_proxy.py _handle_completions): the prefill leg carries
// remote_decoder {kv_request_id} with max_tokens 1 and stream false, the
// decode leg remote_prefiller {kv_request_id, remote_host, remote_port}
// naming that prefiller, one uuid4 for both, sent as X-Request-Id too.
// With the content check on, the prefill leg asks for the decode leg's
// max_tokens instead of 1: its text is then the prefiller's own greedy
// completion, what the decode leg must answer (as test_disagg_accuracy.py
// compares a normal server's outputs with the disaggregated ones).
type pdMode struct{}

func (pdMode) seed(prefix []byte, id string) []byte {
	b := append(prefix, `,"stream":false,"kv_transfer_params":{"remote_decoder":{"kv_request_id":"`...)
	b = append(b, id...)
	return append(b, `"}}}`...)
}
func (pdMode) pullHead() string {
	return `,"kv_transfer_params":{"remote_prefiller":{"kv_request_id":"`
}
func (pdMode) pullID(id string) string    { return id }
func (pdMode) requestID(id string) string { return id }

// strategyFor is the strategy of mode ("" is p2p).
func strategyFor(mode string) (strategy, error) {
	if err := event.CheckMode(mode); err != nil {
		return nil, err
	}
	if event.ModeOf(mode) == event.ModePD {
		return pdMode{}, nil
	}
	return p2pMode{}, nil
}
