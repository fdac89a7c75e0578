package ui

import (
	"fmt"

	"p2pfault/check"
	"p2pfault/event"
)

// metricsHead are the process table's columns of each engine's own
// /metrics (shown once any engine was scraped): requests running and
// waiting, the external prefix cache hit rate over the scraper's rate
// window (10 s) and the P2P read throughput; "–" for a series the engine
// does not export.
var metricsHead = []string{"RUN", "WAIT", "EXT HIT 10s", "P2P READ"}

func metricsCells(m event.MetricsInfo, ok bool) []string {
	if !ok {
		return []string{"–", "–", "–", "–"}
	}
	l := m.Live
	hit := "–"
	if l.HitRate.OK {
		hit = fmtPercent(l.HitRate.V)
	}
	read := "–"
	if l.P2PReadBps.OK {
		read = event.FormatRate(l.P2PReadBps.V)
	}
	return []string{gauge(l.Running), gauge(l.Waiting), hit, read}
}

// lookupHead is the column of each engine's async KV-offload lookup delay
// (vllm:kv_offload_lookup_async_delay_seconds) over the rate window: the
// median as its buckets place it and the highest bucket, shown only
// once an engine exports it. The decoder's is the one that grows when a
// source it pulls from is busy (vLLM #55179).
const lookupHead = "LOOKUP 10s p50/max"

// exportsLookup says whether an engine scraped exports the lookup delay.
func exportsLookup(ms map[string]event.MetricsInfo) bool {
	for _, m := range ms {
		if m.Live.LookupAsync.Exported {
			return true
		}
	}
	return false
}

func lookupCell(m event.MetricsInfo, ok bool) string {
	d := m.Live.LookupAsync
	if !ok || !d.Exported {
		return "–"
	}
	p50, top, ok := delayFigures(d)
	if !ok {
		return "none"
	}
	return p50 + "/" + top
}

// delayFigures are a delay's median and highest bucket, short ("15ms",
// "≤100ms", ">10.0s" past the last bound); ok is false when no lookup was
// observed.
func delayFigures(d event.Delay) (p50, top string, ok bool) {
	if !d.P50.OK {
		return "", "", false
	}
	top = "≤" + fmtDelay(d.Max.V)
	if d.Over {
		top = ">" + fmtDelay(d.Max.V)
	}
	return fmtDelay(d.P50.V), top, true
}

// fmtDelay is a delay in seconds, short: "3ms", "2.5s".
func fmtDelay(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0fms", s*1e3)
	}
	return fmt.Sprintf("%.1fs", s)
}

func gauge(v event.MetricValue) string {
	if !v.OK {
		return "–"
	}
	return fmt.Sprintf("%.0f", v.V)
}

// timesLine is the verdict's detect and recover times (the judge's, check.Judge),
// "" for a verdict without them.
func timesLine(t *event.Times) string {
	if t == nil {
		return ""
	}
	return "detect " + check.FormatSeconds(t.DetectS) + "  recover " + check.FormatSeconds(t.RecoverS)
}
