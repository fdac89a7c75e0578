// Package scrape reads vLLM's own view of a run: each engine's /metrics,
// parsed with the Prometheus exposition parser (prometheus/common/expfmt),
// reduced to the series p2pfault shows (requests running and waiting, the
// external prefix cache hit rate, P2P read throughput). A series an engine
// does not export is absent, never 0: a face shows it as "–".
package scrape

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"p2pfault/event"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The series read, as vLLM names them (reference §5).
const (
	SeriesRunning    = "vllm:num_requests_running"
	SeriesWaiting    = "vllm:num_requests_waiting"
	SeriesExtHits    = "vllm:external_prefix_cache_hits_total"
	SeriesExtQueries = "vllm:external_prefix_cache_queries_total"
	SeriesTierRead   = "vllm:kv_offload_tiering_read_bytes_total"
	// TierLabel and TierP2P select the P2P tier of SeriesTierRead: tiers
	// are labelled "0:primary" and "1:p2p" (p2p as the first secondary).
	TierLabel = "tier"
	TierP2P   = "1:p2p"
	// The KV-offload connector's lookup delays, histograms in seconds
	// (vllm/distributed/kv_transfer/kv_connector/v1/offloading/metrics.py,
	// _ConnectorMetricName); when an engine exports only the tiering
	// manager's (vllm/v1/kv_offload/tiering/base.py,
	// TieringOffloadingMetrics, labelled by tier), the P2P tier's is read.
	SeriesLookupSync      = "vllm:kv_offload_lookup_sync_delay_seconds"
	SeriesLookupAsync     = "vllm:kv_offload_lookup_async_delay_seconds"
	SeriesTierLookupSync  = "vllm:kv_offload_tiering_lookup_sync_delay_seconds"
	SeriesTierLookupAsync = "vllm:kv_offload_tiering_lookup_async_delay_seconds"
	// The stores parked on a producer waiting for a fetch and the blocks
	// they pin, summed over their kinds: the sim's own (vLLM's P2P tier
	// exports no such metric).
	SeriesParkedStores = "sim:p2p_parked_stores"
	SeriesPinnedBlocks = "sim:p2p_pinned_blocks"
)

// Parse reads one exposition in format (expfmt.ResponseFormat of the
// response; the text format when unknown) and extracts the series.
func Parse(r io.Reader, format expfmt.Format) (event.Reading, error) { return parse(r, format, true) }

func parse(r io.Reader, format expfmt.Format, filter bool) (event.Reading, error) {
	fams := map[string]*dto.MetricFamily{}
	if t := format.FormatType(); filter && (t == expfmt.TypeTextPlain || t == expfmt.TypeOpenMetrics || t == expfmt.TypeUnknown) {
		// vLLM exports ~40 families, mostly histograms, and a few are read:
		// handing the parser only their lines makes a scrape about 20
		// times cheaper. Lines are kept or dropped whole by their metric
		// name; parsing stays expfmt's.
		r = onlyWanted(r)
	}
	dec := expfmt.NewDecoder(r, format)
	for {
		var f dto.MetricFamily
		err := dec.Decode(&f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return event.Reading{}, fmt.Errorf("parse metrics: %w", err)
		}
		fams[f.GetName()] = &f
	}
	family := func(name string) *dto.MetricFamily {
		if f := fams[name]; f != nil {
			return f
		}
		// OpenMetrics names a counter's family without its _total suffix.
		if n, ok := cutSuffix(name, "_total"); ok {
			return fams[n]
		}
		return nil
	}
	isP2P := func(m *dto.Metric) bool { return label(m, TierLabel) == TierP2P }
	return event.Reading{
		Running:      sum(family(SeriesRunning), nil),
		Waiting:      sum(family(SeriesWaiting), nil),
		ExtHits:      sum(family(SeriesExtHits), nil),
		ExtQueries:   sum(family(SeriesExtQueries), nil),
		P2PReadBytes: sum(family(SeriesTierRead), isP2P),
		LookupSync:   lookupDelay(family, SeriesLookupSync, SeriesTierLookupSync, isP2P),
		LookupAsync:  lookupDelay(family, SeriesLookupAsync, SeriesTierLookupAsync, isP2P),
		ParkedStores: sum(family(SeriesParkedStores), nil),
		PinnedBlocks: sum(family(SeriesPinnedBlocks), nil),
	}, nil
}

// lookupDelay is the connector's histogram name summed over its label
// sets, or else the tiering manager's tiered's P2P tier; nil when neither
// is exported.
func lookupDelay(family func(string) *dto.MetricFamily, name, tiered string, isP2P func(*dto.Metric) bool) *event.Histogram {
	if h := sumHist(family(name), nil); h != nil {
		return h
	}
	return sumHist(family(tiered), isP2P)
}

// sumHist adds the histograms of f's metrics that keep accepts (all when
// nil), bucket by bucket; nil when f is nil or none matched.
func sumHist(f *dto.MetricFamily, keep func(*dto.Metric) bool) *event.Histogram {
	if f == nil {
		return nil
	}
	var out *event.Histogram
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil || keep != nil && !keep(m) {
			continue
		}
		if out == nil {
			out = &event.Histogram{}
		}
		out.Count += float64(h.GetSampleCount())
		out.Sum += h.GetSampleSum()
		for _, b := range h.GetBucket() {
			if math.IsInf(b.GetUpperBound(), +1) {
				continue
			}
			out.Buckets = addBucket(out.Buckets, b.GetUpperBound(), float64(b.GetCumulativeCount()))
		}
	}
	return out
}

// addBucket adds n to the bucket bounded by le, kept in ascending order.
func addBucket(bs []event.Bucket, le, n float64) []event.Bucket {
	i, found := slices.BinarySearchFunc(bs, le, func(b event.Bucket, le float64) int { return cmp.Compare(b.Le, le) })
	if found {
		bs[i].N += n
		return bs
	}
	return slices.Insert(bs, i, event.Bucket{Le: le, N: n})
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return "", false
}

// sum adds the values of f's metrics that keep accepts (all when nil);
// absent when f is nil or none matched.
func sum(f *dto.MetricFamily, keep func(*dto.Metric) bool) event.MetricValue {
	if f == nil {
		return event.MetricValue{}
	}
	var v event.MetricValue
	for _, m := range f.GetMetric() {
		if keep != nil && !keep(m) {
			continue
		}
		x, ok := value(m)
		if !ok {
			continue
		}
		v = event.MetricOf(v.V + x)
	}
	return v
}

func value(m *dto.Metric) (float64, bool) {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), true
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), true
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// wanted are the family names read, as text and OpenMetrics name them.
var wanted = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range []string{SeriesRunning, SeriesWaiting, SeriesExtHits, SeriesExtQueries, SeriesTierRead, SeriesParkedStores, SeriesPinnedBlocks} {
		m[n] = true
		if base, ok := cutSuffix(n, "_total"); ok {
			m[base] = true
		}
	}
	for _, n := range []string{SeriesLookupSync, SeriesLookupAsync, SeriesTierLookupSync, SeriesTierLookupAsync} {
		// A histogram's samples are named for its series.
		for _, suffix := range []string{"", "_bucket", "_sum", "_count", "_created"} {
			m[n+suffix] = true
		}
	}
	return m
}()

// onlyWanted passes the lines of the wanted families (their samples and
// their # HELP and # TYPE lines) and every other comment (# EOF), and
// drops the rest.
func onlyWanted(r io.Reader) io.Reader {
	data, err := io.ReadAll(r)
	if err != nil {
		return &errReader{err}
	}
	var out []byte
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		if keepLine(line) {
			out = append(out, line...)
		}
	}
	return bytes.NewReader(out)
}

func keepLine(line []byte) bool {
	if len(line) > 0 && line[0] == '#' {
		f := bytes.Fields(line)
		if len(f) >= 3 && (string(f[1]) == "HELP" || string(f[1]) == "TYPE") {
			return wanted[string(f[2])]
		}
		return true
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return true
	}
	end := bytes.IndexAny(line, "{ \t\n")
	if end < 0 {
		end = len(line)
	}
	name := line[:end]
	// A line that does not start with a metric name is not the exposition
	// format at all (an HTML page, JSON): keep it, so the parser says so
	// rather than the engine seeming to export nothing.
	if !metricName(name) {
		return true
	}
	return wanted[string(name)]
}

// metricName reports whether b is [a-zA-Z_:][a-zA-Z0-9_:]*.
func metricName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for i, c := range b {
		ok := c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }
