package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"p2pfault/event"

	"github.com/google/uuid"
)

// maxBody caps what is read of a response: a completion of a few tokens is
// a few hundred bytes, and a runaway body must not eat the probe's memory.
const maxBody = 1 << 20

// serviceTimeHeader is set by the simulated engine: its own time serving the
// request, so a benchmark can tell the probe's overhead from the engine's.
const serviceTimeHeader = "X-Sim-Service-Time"

// pullInfo is what a trial knows beyond its event.Sample; warm-up uses it to say
// why a source is not handshaken yet.
type pullInfo struct {
	noDetails bool // 200 without usage.prompt_tokens_details.cached_tokens
}

// pair is what a trial goes through: source #i of the list (its rank)
// and the decoder the pull is sent to.
type pair struct {
	i, rank, decoder int
}

// trial seeds a fresh prompt on source #i of the list (mode pd: its prefill
// leg), then pulls it into the decoder naming that source (its decode leg),
// whatever became of the first leg: an answer, an error or the seed
// timeout. The trial goes on to measure the decoder, as vLLM's proxy in
// --decoder-first order does when a prefill fails (its default order
// would wait for the prefill, without a timeout). Both legs name one
// engine: a source replaced meanwhile (Readdress) gets the first leg
// again. started, if not nil, is told of the pull as it is sent.
//
// On a source of several data-parallel ranks the trial is pinned to rank
// (its seed carries X-data-parallel-rank, its pull names the rank's port),
// as vLLM's p2p_connector_proxy.py pins a prefill and names remote_port =
// base + rank.
func (p *Prober) trial(ctx context.Context, t0 time.Time, l pair, n int64, started func(event.PullStart)) (event.Sample, pullInfo) {
	i, rank := l.i, l.rank
	a := p.address(i)
	rank = min(max(rank, 0), len(a.kvTails)-1)
	s := event.Sample{Source: a.src.Index, Rank: rank, Decoder: l.decoder, Trial: n, PromptTokens: p.cfg.PromptTokens}
	prefix := p.bodyPrefix()
	id := uuid.NewString()
	hdr := p.mode.requestID(id)
	var pin string
	if len(a.kvTails) > 1 {
		pin = strconv.Itoa(rank)
	}
	var pull []byte
	var start time.Time
	// own is the first leg's answer: its text is the source's completion
	// (the content check's reference).
	var own result
	var peer string    // the P2P address the pull names: the source's, or its link's
	var pullURL string // where the pull goes: its decoder's URL in force
	for {
		// The first leg gets its own copy: the pull appends to prefix in place.
		seed := p.mode.seed(prefix[:len(prefix):len(prefix)], id)
		r := p.post(ctx, p.sources[i], a.seedURL, seed, p.cfg.SeedTimeout, "source", legSeed, hdr, pin)
		s.SeedStatus, s.SeedLatency, s.SeedErr = r.status, r.latency, r.err
		own = r

		p.addrMu.RLock()
		if cur := p.addrs[i]; cur.gen != a.gen {
			// Replaced since the first leg: that engine is gone.
			p.addrMu.RUnlock()
			a = cur
			rank = min(rank, len(a.kvTails)-1)
			continue
		}
		pull = append(prefix, p.mode.pullHead()...)
		s.KVRequestID = p.mode.pullID(id)
		pull = append(pull, s.KVRequestID...)
		var tail []byte
		peer, tail = p.via(a, rank, l.decoder)
		pull = append(pull, tail...)
		if p.cfg.Stream {
			pull = append(pull, streamFields...)
		}
		pull = append(pull, '}')
		if errors.Is(context.Cause(ctx), ErrAborted) {
			// The run ended (q, Ctrl-C) while this trial seeded: its pull is
			// not sent, so none starts after the run's end.
			p.addrMu.RUnlock()
			s.Start, s.Peer = time.Since(t0), peer
			s.Err, s.Aborted = "not sent: "+ErrAborted.Error(), true
			return s, pullInfo{}
		}
		if started != nil {
			started(event.PullStart{Source: a.src.Index, Rank: s.Rank, Decoder: l.decoder, Trial: n, Start: time.Since(t0), Peer: peer})
		}
		start = time.Now()
		// Read with the source's address: a decoder replaced meanwhile
		// (ReaddressDecoder) gets this pull at its new URL.
		pullURL = p.pullURLs[l.decoder]
		p.addrMu.RUnlock()
		break
	}
	s.Peer = peer
	r := p.postAt(ctx, p.decoders[l.decoder], pullURL, pull, p.cfg.PullTimeout, "decoder", legPull, start, hdr, "")
	s.Start = start.Sub(t0)
	s.Latency, s.Status, s.Err, s.Aborted = r.latency, r.status, r.err, r.aborted
	s.TTFT = r.ttft
	s.ServiceTime = r.service
	// What the decoder counted, or else what was sent.
	if r.promptTokens > 0 {
		s.PromptTokens = r.promptTokens
	}
	s.CachedTokens = r.cachedTokens
	compare(&s, own, r)
	return s, pullInfo{noDetails: r.noDetails}
}

// compare records on s what came of the content check: the pull's text
// against the source's own completion (the seed's), when both answered
// 200 with one. Equal texts are not kept (event.Sample.Content).
func compare(s *event.Sample, own, pull result) {
	if !own.hasText || !pull.hasText || own.status != 200 || own.err != "" || pull.status != 200 || pull.err != "" {
		return
	}
	if own.text == pull.text {
		s.Content = event.ContentSame
		return
	}
	s.Content, s.SourceText, s.PullText = event.ContentDiffers, own.text, pull.text
}

// bodyPrefix encodes `{"model":M,"prompt":[ids],"max_tokens":N,"temperature":0`
// with a fresh prompt: token ids, so real vLLM and the sim see the same
// tokens with no tokenizer in between, drawn at random so that cached tokens
// can only have come over P2P. N is ContentTokens, or 1 (the seed's) when
// texts are not compared; the seed and the pull share the prefix, so they
// ask for the same greedy completion.
func (p *Prober) bodyPrefix() []byte {
	n := p.cfg.PromptTokens
	// Room for the ids, the rest of the body and the kv_transfer_params.
	b := make([]byte, 0, 64+len(p.modelJSON)+7*n+160)
	b = append(b, `{"model":`...)
	b = append(b, p.modelJSON...)
	b = append(b, `,"prompt":[`...)
	p.rngMu.Lock()
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(MinTokenID+p.rng.IntN(MaxTokenID-MinTokenID)), 10)
	}
	p.rngMu.Unlock()
	b = append(b, `],"max_tokens":`...)
	b = strconv.AppendInt(b, int64(max(p.cfg.ContentTokens, 1)), 10)
	return append(b, `,"temperature":0`...)
}

// leg is which request of a trial a POST is: what is read of its answer.
type leg int

const (
	// legSeed is the seed on the source: its text is read when texts are
	// compared (Config.ContentTokens), nothing else.
	legSeed leg = iota
	// legPull is the pull on the decoder: usage and text, streamed when
	// Config.Stream.
	legPull
)

// result of one POST.
type result struct {
	status       int
	latency      time.Duration
	err          string
	service      time.Duration
	promptTokens int
	cachedTokens int
	noDetails    bool
	aborted      bool          // cut short by Abort
	ttft         time.Duration // streamed: until the first token's event
	text         string        // choices[0].text (streamed: its chunks joined)
	hasText      bool          // a text was answered (an empty one too)
}

func (p *Prober) post(ctx context.Context, c *http.Client, u string, body []byte, timeout time.Duration, who string, l leg, requestID, rank string) result {
	return p.postAt(ctx, c, u, body, timeout, who, l, time.Now(), requestID, rank)
}

// RankHeader pins a request to one data-parallel rank of the engine it is
// sent to: vLLM's API server reads it (p2p_connector_proxy.py sends it
// with each prefill, llm-d's router likewise).
const RankHeader = "X-data-parallel-rank"

// postAt sends body to u and reads the answer within timeout; latency counts
// from start until the body was read or the error. who names the answering
// engine in errors ("decoder", "source"); requestID, when set, is sent as
// X-Request-Id, and rank, when set, as RankHeader.
func (p *Prober) postAt(ctx context.Context, c *http.Client, u string, body []byte, timeout time.Duration, who string, l leg, start time.Time, requestID, rank string) result {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r result
	fail := func(err error) result {
		r.latency = time.Since(start)
		r.err = describe(ctx, rctx, err, u, timeout, r.status)
		r.aborted = errors.Is(context.Cause(ctx), ErrAborted)
		return r
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	if rank != "" {
		req.Header.Set(RankHeader, rank)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	r.status = resp.StatusCode
	if l == legPull && p.cfg.Stream && resp.StatusCode == http.StatusOK {
		if err := readStream(&r, resp.Body, start, who); err != nil {
			return fail(err)
		}
		r.latency = time.Since(start)
		return r
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fail(err)
	}
	r.latency = time.Since(start)
	if v := resp.Header.Get(serviceTimeHeader); v != "" {
		// A malformed header says nothing about the pull itself, so it only
		// leaves ServiceTime unset.
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
			r.service = time.Duration(f * float64(time.Second))
		}
	}
	if resp.StatusCode != http.StatusOK {
		r.err = fmt.Sprintf("%s answered %d %s: %s", who, resp.StatusCode, http.StatusText(resp.StatusCode), errorMessage(data))
		return r
	}
	switch {
	case l == legPull:
		parseUsage(&r, data, who)
	case p.cfg.ContentTokens > 0:
		parseText(&r, data)
	}
	return r
}

// choice is what is read of an answer's choices[0]: its text.
type choice struct {
	Text *string `json:"text"`
}

// takeText records choices[0].text, appended to what came before (a
// stream's chunks).
func (r *result) takeText(choices []choice) {
	if len(choices) > 0 && choices[0].Text != nil {
		r.text += *choices[0].Text
		r.hasText = true
	}
}

// parseText reads choices[0].text of the seed's answer; a body that is not
// a completion leaves the seed with no text to compare, and the trial
// goes on (the seed's status is what the slice looks at).
func parseText(r *result, data []byte) {
	var body struct {
		Choices []choice `json:"choices"`
	}
	if json.Unmarshal(data, &body) == nil {
		r.takeText(body.Choices)
	}
}

// parseUsage reads usage.prompt_tokens,
// usage.prompt_tokens_details.cached_tokens (a missing or null count is 0)
// and choices[0].text.
func parseUsage(r *result, data []byte, who string) {
	var body struct {
		Choices []choice `json:"choices"`
		Usage   *struct {
			PromptTokens *int `json:"prompt_tokens"`
			Details      *struct {
				Cached *int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(data, &body); err != nil {
		r.err = fmt.Sprintf("%s answered %d but the body is not valid JSON (%v): %s", who, r.status, err, snippet(data))
		return
	}
	r.takeText(body.Choices)
	u := body.Usage
	if u == nil || u.Details == nil || u.Details.Cached == nil {
		r.noDetails = true
	}
	if u == nil {
		return
	}
	if u.PromptTokens != nil {
		if *u.PromptTokens < 0 {
			r.err = fmt.Sprintf("%s answered usage.prompt_tokens %d, which is negative", who, *u.PromptTokens)
			return
		}
		r.promptTokens = *u.PromptTokens
	}
	if u.Details != nil && u.Details.Cached != nil {
		if *u.Details.Cached < 0 {
			r.err = fmt.Sprintf("%s answered usage.prompt_tokens_details.cached_tokens %d, which is negative", who, *u.Details.Cached)
			return
		}
		r.cachedTokens = *u.Details.Cached
	}
}

// describe turns a request error into a sample's Err, saying which deadline
// ended it rather than Go's bare "context deadline exceeded". status is the
// answer's when the error came while reading its body, else 0.
func describe(parent, rctx context.Context, err error, u string, timeout time.Duration, status int) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	what := "no answer"
	if status != 0 {
		what = fmt.Sprintf("answered %d but the body was not read", status)
	}
	switch {
	case errors.Is(context.Cause(parent), errWarmupDeadline):
		return fmt.Sprintf("POST %s: %s before the warm-up deadline", u, what)
	case parent.Err() != nil:
		return fmt.Sprintf("POST %s: %s: %v", u, what, context.Cause(parent))
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return fmt.Sprintf("POST %s: %s within %s (timeout)", u, what, timeout)
	case status != 0:
		return fmt.Sprintf("POST %s: %s: %v", u, what, err)
	default:
		return fmt.Sprintf("POST %s: %v", u, err)
	}
}

// errorMessage pulls the message out of an OpenAI-style error body
// ({"error":{"message":...}} or vLLM's older {"message":...}), else shows the
// start of the body.
func errorMessage(data []byte) string {
	var body struct {
		Message string `json:"message"`
		Error   *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil {
		if body.Error != nil && body.Error.Message != "" {
			return body.Error.Message
		}
		if body.Message != "" {
			return body.Message
		}
	}
	return snippet(data)
}

func snippet(data []byte) string {
	const max = 200
	s := strings.TrimSpace(string(data))
	if s == "" {
		return "(empty body)"
	}
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}
