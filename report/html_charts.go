package report

import (
	"cmp"
	"slices"
	"time"

	"p2pfault/check"
	"p2pfault/event"
)

// pageData is the JSON report.html carries for its charts: one entry per
// row, read by page.js. Times are seconds since t0.
type pageData struct {
	Rows []chartRow `json:"rows"`
	// Sweeps are the figures against a swept setting's values (sweep.go);
	// absent without a sweep.
	Sweeps []chartSweep `json:"sweeps,omitempty"`
}

type chartRow struct {
	ID     string  `json:"id"`
	Title  string  `json:"title"`
	RunEnd float64 `json:"run_end_s"`
	// FaultedBound is the faulted_max bound, a dashed line on the latency
	// charts (0: none).
	FaultedBound float64        `json:"faulted_bound_s"`
	Windows      []chartWindow  `json:"windows"`
	Faults       []chartFault   `json:"faults"`
	Pulls        []chartPull    `json:"pulls"`
	HitRate      []chartHitRate `json:"hit_rate"`
	Decoder      []chartDecoder `json:"decoder"`
	Sources      []int          `json:"sources"`
	// CauseLabels names each cause the pulls carry (their latency chart is
	// coloured by cause then); absent for a stream from before causes.
	CauseLabels map[event.Cause]string `json:"cause_labels,omitempty"`
}

// chartWindow is a fault window and the recovery window after it
// (RecoveryEnd 0: the fault does not recover).
type chartWindow struct {
	Source      int     `json:"source"`
	Start       float64 `json:"start_s"`
	End         float64 `json:"end_s"`
	RecoveryEnd float64 `json:"recovery_end_s,omitempty"`
}

type chartFault struct {
	T      float64 `json:"t_s"`
	Action string  `json:"action"`
	Source int     `json:"source"`
	By     string  `json:"by"`
	Err    string  `json:"error,omitempty"`
}

// Pull states, the series of a latency chart.
const (
	pullHit      = "hit"
	pullMiss     = "miss"
	pullFailed   = "failed"     // not 200
	pullAborted  = "aborted"    // cut short when the run ended early
	pullInFlight = "in flight"  // started, never ended in the events
	pullWrong    = "wrong text" // 200, another text than the source's (check content_matches)
)

// chartPull is one pull as its tooltip tells it. Latency of a pull in
// flight is its age at the events' last moment: a lower bound.
type chartPull struct {
	Source  int     `json:"source"`
	Trial   int64   `json:"trial"`
	State   string  `json:"state"`
	Start   float64 `json:"start_s"`
	Latency float64 `json:"latency_s"`
	Status  int     `json:"status"`
	Prompt  int     `json:"prompt_tokens"`
	Cached  int     `json:"cached_tokens"`
	TTFT    float64 `json:"ttft_s,omitempty"`
	Err     string  `json:"error,omitempty"`
	// The texts of a wrong pull (state "wrong text").
	PullText   string `json:"pull_text,omitempty"`
	SourceText string `json:"source_text,omitempty"`
	Peer       string `json:"peer,omitempty"` // the P2P address the pull named (a replaced source has two)
	// Cause is what ended the pull and Timer the setting behind it (package
	// cause); absent in a stream from before causes.
	Cause event.Cause `json:"cause,omitempty"`
	Timer string      `json:"timer,omitempty"`
}

// chartHitRate is one source's hit rate over time: the share of its pulls
// that hit, by the bin of their start.
type chartHitRate struct {
	Source int           `json:"source"`
	Bin    float64       `json:"bin_s"`
	Points []chartHitBin `json:"points"`
}

type chartHitBin struct {
	T    float64 `json:"t_s"` // the bin's start
	Hits int     `json:"hits"`
	N    int     `json:"n"`
}

// chartDecoder is one scrape of the decoder's /metrics, its live figures as
// the dashboard showed them (null: not exported).
type chartDecoder struct {
	T    float64    `json:"t_s"`
	Live event.Live `json:"live"`
}

// hitRateBins is how many trials of a source a hit-rate bin spans: enough
// that one miss is not a cliff, few enough that a recovery shows as a slope.
const hitRateBins = 8

func chartData(id string, run Run) chartRow {
	c := chartRow{
		ID:           id,
		Title:        runTitle(run.Info.Arm, run.Info.Mode, run.Info.Case, " / ") + settingsSuffix(run.Info.Settings, " "),
		RunEnd:       run.RunEnd.Seconds(),
		FaultedBound: run.Info.Bounds.FaultedMax.Seconds(),
		Windows:      []chartWindow{},
		Faults:       []chartFault{},
		Pulls:        []chartPull{},
		HitRate:      []chartHitRate{},
		Decoder:      []chartDecoder{},
		Sources:      chartSources(run),
	}
	for _, w := range run.Windows {
		cw := chartWindow{Source: w.Source, Start: w.Start.Seconds(), End: w.End.Seconds()}
		if w.Recovers && run.Info.Bounds.RecoveryWindow > 0 {
			cw.RecoveryEnd = min(w.End+run.Info.Bounds.RecoveryWindow, max(run.RunEnd, w.End)).Seconds()
		}
		c.Windows = append(c.Windows, cw)
	}
	for _, f := range run.html.faults {
		c.Faults = append(c.Faults, chartFault{T: f.T.Seconds(), Action: f.Action, Source: f.Source, By: f.By, Err: f.Err})
	}
	rule := check.ContentRuleOf(run.Info)
	for _, s := range run.Samples {
		p := chartPull{Source: s.Source, Trial: s.Trial, State: pullState(s), Start: s.Start.Seconds(),
			Latency: s.Latency.Seconds(), Status: s.Status, Prompt: s.PromptTokens, Cached: s.CachedTokens,
			TTFT: s.TTFT.Seconds(), Err: s.Err, Peer: s.Peer, Cause: s.Cause}
		if s.Timer != nil {
			p.Timer = s.Timer.String()
		}
		if s.Cause != "" {
			if c.CauseLabels == nil {
				c.CauseLabels = map[event.Cause]string{}
			}
			c.CauseLabels[s.Cause] = s.Cause.Label()
		}
		if rule.Wrong(s) {
			p.State, p.PullText, p.SourceText = pullWrong, s.PullText, s.SourceText
		}
		c.Pulls = append(c.Pulls, p)
	}
	for _, p := range run.pending() {
		c.Pulls = append(c.Pulls, chartPull{Source: p.Source, Trial: p.Trial, State: pullInFlight, Start: p.Start.Seconds(),
			Latency: max(run.html.lastT-p.Start, 0).Seconds(), Peer: p.Peer})
	}
	slices.SortStableFunc(c.Pulls, func(a, b chartPull) int { return cmp.Compare(a.Start, b.Start) })
	c.HitRate = hitRate(run)
	for _, p := range run.html.decoder {
		c.Decoder = append(c.Decoder, chartDecoder{T: p.T.Seconds(), Live: p.Live})
	}
	return c
}

func pullState(s event.Sample) string {
	switch {
	case s.Aborted:
		return pullAborted
	case s.Status != 200:
		return pullFailed
	case s.Hit():
		return pullHit
	}
	return pullMiss
}

// chartSources is every source a pull names, ended or not, in order.
func chartSources(run Run) []int {
	out := sources(run)
	for _, p := range run.pending() {
		if !slices.Contains(out, p.Source) {
			out = append(out, p.Source)
		}
	}
	slices.Sort(out)
	return out
}

// hitRate bins each source's ended pulls (aborted ones excepted: they
// never got an answer) by start time.
func hitRate(run Run) []chartHitRate {
	bin := hitRateBins * run.Info.Interval
	if bin <= 0 {
		bin = 2 * time.Second
	}
	type counts struct{ hits, n int }
	by := map[int]map[int64]*counts{}
	for _, s := range run.Samples {
		if s.Aborted || s.Start < 0 {
			continue
		}
		if by[s.Source] == nil {
			by[s.Source] = map[int64]*counts{}
		}
		k := int64(s.Start / bin)
		if by[s.Source][k] == nil {
			by[s.Source][k] = &counts{}
		}
		by[s.Source][k].n++
		if s.Hit() {
			by[s.Source][k].hits++
		}
	}
	out := []chartHitRate{}
	for _, src := range sources(run) {
		bins := by[src]
		if len(bins) == 0 {
			continue
		}
		keys := make([]int64, 0, len(bins))
		for k := range bins {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		h := chartHitRate{Source: src, Bin: bin.Seconds()}
		for _, k := range keys {
			h.Points = append(h.Points, chartHitBin{T: (time.Duration(k) * bin).Seconds(), Hits: bins[k].hits, N: bins[k].n})
		}
		out = append(out, h)
	}
	return out
}
