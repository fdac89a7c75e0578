package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The engines' own figures as package scrape reads them from /metrics.

// MetricValue is a series' value, or absent (OK false) when the engine does not
// export it. In JSON an absent value is null.
type MetricValue struct {
	V  float64
	OK bool
}

// MetricOf is a present value.
func MetricOf(v float64) MetricValue { return MetricValue{V: v, OK: true} }

// String shows the value, "–" when absent; whole numbers without decimals.
func (v MetricValue) String() string {
	if !v.OK {
		return "–"
	}
	return strconv.FormatFloat(v.V, 'f', -1, 64)
}

// MarshalJSON writes null for an absent value.
func (v MetricValue) MarshalJSON() ([]byte, error) {
	if !v.OK || math.IsNaN(v.V) || math.IsInf(v.V, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(v.V)
}

// UnmarshalJSON reads null as absent.
func (v *MetricValue) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*v = MetricValue{}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("metric value %s: %w", b, err)
	}
	*v = MetricOf(f)
	return nil
}

// Reading is the series of one scrape of one engine. Each is the sum over
// the label sets that match (vLLM labels by model and, with data
// parallelism, by engine index).
type Reading struct {
	Running      MetricValue `json:"running"`        // gauge
	Waiting      MetricValue `json:"waiting"`        // gauge
	ExtHits      MetricValue `json:"ext_hits"`       // counter, tokens
	ExtQueries   MetricValue `json:"ext_queries"`    // counter, tokens
	P2PReadBytes MetricValue `json:"p2p_read_bytes"` // counter, bytes read from the P2P tier
	// The KV-offload lookup delays (vLLM's
	// vllm:kv_offload_lookup_{sync,async}_delay_seconds): nil when the
	// engine does not export them. Async is the wait from a lookup's
	// first RETRY until it resolved: what a busy source's scheduler adds.
	LookupSync  *Histogram `json:"lookup_sync,omitempty"`
	LookupAsync *Histogram `json:"lookup_async,omitempty"`
	// The stores parked on the engine waiting for a fetch and the blocks
	// they pin (the sim's sim:p2p_parked_stores, sim:p2p_pinned_blocks;
	// vLLM exports none): absent, and left out of JSON, for an engine that
	// does not export them.
	ParkedStores MetricValue `json:"parked_stores,omitzero"`
	PinnedBlocks MetricValue `json:"pinned_blocks,omitzero"`
}

// Histogram is a histogram series as read: its observations' count and
// sum and its cumulative buckets by upper bound, ascending (the +Inf
// bucket is Count, not listed: JSON has no infinity).
type Histogram struct {
	Count   float64  `json:"count"`
	Sum     float64  `json:"sum"`
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is one cumulative bucket: N observations were at most Le.
type Bucket struct {
	Le float64 `json:"le"`
	N  float64 `json:"n"`
}

// Delay is what a delay histogram gained over a span of time: how many
// observations, their mean (exact: from the sum), their median as the
// buckets place it (Prometheus's histogram_quantile) and the bound of the
// highest bucket any fell in (Over: past the highest finite bound, Max is
// that bound). Absent values when the engine does not export the series;
// N 0 and absent Mean, P50 and Max when nothing was observed.
type Delay struct {
	N    int         `json:"n"`
	Mean MetricValue `json:"mean_s"`
	P50  MetricValue `json:"p50_s"`
	Max  MetricValue `json:"max_le_s"`
	Over bool        `json:"over,omitempty"`
	// Exported: the engine exports the series at all.
	Exported bool `json:"exported"`
}

// Live is one engine's figures at its latest scrape: the gauges as read and
// the counters as rates over the last rate window.
type Live struct {
	Running    MetricValue   `json:"running"`
	Waiting    MetricValue   `json:"waiting"`
	HitRate    MetricValue   `json:"hit_rate"`     // external prefix cache, fraction in [0, 1]; absent with no queries in the window
	P2PReadBps MetricValue   `json:"p2p_read_bps"` // P2P bytes read per second
	Window     time.Duration `json:"window_ns"`    // what the rates span: up to the rate window, less early in a run
	// LookupAsync is the async lookup delay observed over the rate window.
	LookupAsync Delay `json:"lookup_async"`
}

// FormatBytes shows a byte count (P2PReadBytes) as B, KiB, MiB or GiB.
func FormatBytes(v float64) string { return scaled(v, 1024, "B", "KiB", "MiB", "GiB") }

// FormatRate shows bytes a second (P2PReadBps) as B/s, KB/s, MB/s or GB/s.
func FormatRate(bps float64) string { return scaled(bps, 1000, "B/s", "KB/s", "MB/s", "GB/s") }

// scaled shows v in the largest of units (each step times the one
// before) that keeps it at 1 or more: whole in the first, to a tenth in
// the others.
func scaled(v, step float64, units ...string) string {
	i := 0
	for v >= step && i < len(units)-1 {
		v /= step
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}
