package report

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"p2pfault/event"
)

// hostile is text an engine or an error could carry that would break a
// page that did not escape it: it closes the script element, opens a new
// one, and adds an element with an event handler.
const hostile = `</script><script>window.__pwned=1</script><img id="pwned" src=x onerror="window.__pwned=2">&amp; "quoted" 'single'`

// htmlSlice is a two-arm slice as its events tell it: main and fixed ×
// stall and remove, the seed's shapes (fixture.go), plus what only
// report.html shows: the decoder's /metrics once a second, pull_start
// events for every pull, a pull in main/stall that failed with a hostile
// error, one that never ended, a hostile engine log line and warning, and
// streamed pulls (TTFT) in fixed/stall.
func htmlSlice(t testing.TB) []Run {
	t.Helper()
	fixed := func(f fixture) fixture { f.arm = "fixed"; return f }
	fs := []fixture{mainStall(), fixed(fixedStall()), mainRemove(), fixed(mainRemove())}
	var runs []Run
	for i, f := range fs {
		if i == 0 {
			f.samples = withFailedPull(f.samples)
		}
		if i == 1 {
			for k := range f.samples {
				f.samples[k].TTFT = f.samples[k].Latency * 4 / 5
			}
		}
		evs := withHTMLFacts(f, i == 0)
		r, err := FromEvents(evs)
		if err != nil {
			t.Fatalf("fixture %s/%s: %v", f.arm, f.kase, err)
		}
		runs = append(runs, r)
	}
	return runs
}

// failedTrial is the trial of main/stall's failed pull; pendingTrial the
// one that never ends.
const (
	failedTrial  = 9001
	pendingTrial = 9002
)

func failedPullOf() event.Sample {
	return event.Sample{Source: 0, Trial: failedTrial, Start: sec(21.5), Latency: sec(12.25), Status: 500,
		PromptTokens: 400, Err: hostile, SeedStatus: 200}
}

func pendingPullOf() event.PullStart {
	return event.PullStart{Source: 0, Trial: pendingTrial, Start: sec(61.25)}
}

func withFailedPull(samples []event.Sample) []event.Sample {
	out := append(slices.Clone(samples), failedPullOf())
	slices.SortStableFunc(out, func(a, b event.Sample) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

// withHTMLFacts is f's events with the extra ones; hostileRow adds the
// pending pull and the hostile log line and warning.
func withHTMLFacts(f fixture, hostileRow bool) []event.Event {
	evs := f.events()
	var extra []event.Event
	for _, s := range f.samples {
		extra = append(extra, event.Event{T: s.Start, Kind: event.KindPullStart, Pulls: []event.PullStart{{Source: s.Source, Trial: s.Trial, Start: s.Start}}})
	}
	if hostileRow {
		p := pendingPullOf()
		extra = append(extra,
			event.Event{T: p.Start, Kind: event.KindPullStart, Pulls: []event.PullStart{p}},
			event.Event{T: sec(12), Kind: event.KindLog, Log: &event.LogLine{Engine: "decoder", Line: "WARNING [p2p] " + hostile}},
			event.Event{T: sec(13), Kind: event.KindWarning, Message: "metrics of source-0: " + hostile},
		)
	}
	// The decoder's scrapes: its external hit rate falls in the fault window.
	var hits, queries float64
	for at := time.Duration(0); at <= runDuration; at += time.Second {
		rate := 0.95
		if at >= f.window.Start && at < f.window.End {
			rate = 0.5
		}
		hits += rate * 800
		queries += 800
		info := &event.MetricsInfo{Engine: DecoderEngine,
			Reading: event.Reading{Running: event.MetricOf(2), Waiting: event.MetricOf(1), ExtHits: event.MetricOf(hits), ExtQueries: event.MetricOf(queries), P2PReadBytes: event.MetricOf(hits * 1024)},
			Live:    event.Live{Running: event.MetricOf(2), Waiting: event.MetricOf(1), HitRate: event.MetricOf(rate), P2PReadBps: event.MetricOf(rate * 800 * 1024), Window: 10 * time.Second},
		}
		extra = append(extra, event.Event{T: at, Kind: event.KindMetrics, Metrics: info})
	}
	evs = append(evs, extra...)
	slices.SortStableFunc(evs, func(a, b event.Event) int { return cmp.Compare(a.T, b.T) })
	for i := range evs {
		evs[i].Seq = int64(i + 1)
		evs[i].Wall = wall0().Add(evs[i].T)
	}
	return evs
}
