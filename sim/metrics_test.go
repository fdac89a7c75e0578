package sim

import (
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"p2pfault/sim/engine"
)

// TestLookupDelaysAreVLLMsHistograms: the decoder's lookup delays are
// exported as vLLM's two histograms, with its buckets, and parse as
// Prometheus text: a pull deferred 52 ms and one resolved at once (no
// async delay), each with a sync delay of 20 µs.
func TestLookupDelaysAreVLLMsHistograms(t *testing.T) {
	m := newMetrics()
	m.record(engine.Stats{LookupSync: 20 * time.Microsecond, LookupAsync: 52 * time.Millisecond, LookupDeferred: true}, 1, true, true)
	m.record(engine.Stats{LookupSync: 20 * time.Microsecond}, 1, true, true)
	m.record(engine.Stats{}, 1, true, false) // no lookup call timed: no sync observation
	var b bytes.Buffer
	f := &frontEnd{cfg: serveConfig{Model: "m"}, cores: []*coreLink{{metrics: m}}}
	if err := f.writeMetrics(&b); err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for {
		var f dto.MetricFamily
		if err := dec.Decode(&f); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("parse /metrics: %v", err)
		}
		fams[f.GetName()] = &f
	}
	for _, tt := range []struct {
		name    string
		buckets []float64
		count   uint64
		sum     float64
		le      float64 // the smallest bound that counts every observation
	}{
		{"vllm:kv_offload_lookup_sync_delay_seconds", lookupSyncBuckets, 2, 40e-6, 0.00005},
		{"vllm:kv_offload_lookup_async_delay_seconds", lookupAsyncBuckets, 1, 0.052, 0.1},
	} {
		f := fams[tt.name]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM || len(f.Metric) != 1 {
			t.Errorf("%s: %v, want one histogram series", tt.name, f)
			continue
		}
		h := f.Metric[0].GetHistogram()
		var bounds []float64
		for _, bk := range h.GetBucket() {
			bounds = append(bounds, bk.GetUpperBound())
			want := uint64(0)
			if bk.GetUpperBound() >= tt.le {
				want = tt.count
			}
			if bk.GetCumulativeCount() != want {
				t.Errorf("%s bucket le=%g: %d, want %d", tt.name, bk.GetUpperBound(), bk.GetCumulativeCount(), want)
			}
		}
		if !slices.Equal(bounds, append(slices.Clone(tt.buckets), math.Inf(1))) || h.GetSampleCount() != tt.count || h.GetSampleSum() < tt.sum*0.999 || h.GetSampleSum() > tt.sum*1.001 {
			t.Errorf("%s: buckets %v count %d sum %g, want vLLM's %v and +Inf, %d, %g", tt.name, bounds, h.GetSampleCount(), h.GetSampleSum(), tt.buckets, tt.count, tt.sum)
		}
	}
}
