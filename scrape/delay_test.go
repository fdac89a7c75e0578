package scrape

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"p2pfault/event"
)

// lookupText is the connector's async lookup delay as vLLM writes it, on
// two engines of data parallelism, with buckets as vLLM's tiering spec
// gives them (0.0001 ... 10 s), with a series the parser must not read.
func lookupText(n1, n5, inf int, sum float64) string {
	b := func(le string, n int) string {
		return `vllm:kv_offload_lookup_async_delay_seconds_bucket{engine="0",le="` + le + `",model_name="m"} ` + itoa(n) + "\n"
	}
	return "# HELP vllm:kv_offload_lookup_async_delay_seconds Async lookup delay.\n" +
		"# TYPE vllm:kv_offload_lookup_async_delay_seconds histogram\n" +
		b("0.1", 0) + b("1.0", n1) + b("5.0", n1+n5) + b("10.0", n1+n5) + b("+Inf", n1+n5+inf) +
		`vllm:kv_offload_lookup_async_delay_seconds_count{engine="0",model_name="m"} ` + itoa(n1+n5+inf) + "\n" +
		`vllm:kv_offload_lookup_async_delay_seconds_sum{engine="0",model_name="m"} ` + ftoa(sum) + "\n" +
		`vllm:kv_offload_lookup_async_delay_seconds_bucket{engine="1",le="0.1",model_name="m"} 0` + "\n" +
		`vllm:kv_offload_lookup_async_delay_seconds_bucket{engine="1",le="1.0",model_name="m"} 1` + "\n" +
		`vllm:kv_offload_lookup_async_delay_seconds_bucket{engine="1",le="5.0",model_name="m"} 1` + "\n" +
		`vllm:kv_offload_lookup_async_delay_seconds_bucket{engine="1",le="10.0",model_name="m"} 1` + "\n" +
		`vllm:kv_offload_lookup_async_delay_seconds_bucket{engine="1",le="+Inf",model_name="m"} 1` + "\n" +
		`vllm:kv_offload_lookup_async_delay_seconds_count{engine="1",model_name="m"} 1` + "\n" +
		`vllm:kv_offload_lookup_async_delay_seconds_sum{engine="1",model_name="m"} 0.5` + "\n" +
		"# TYPE vllm:kv_offload_store_time histogram\nvllm:kv_offload_store_time_bucket{le=\"+Inf\"} 9\n"
}

func itoa(n int) string     { return ftoa(float64(n)) }
func ftoa(f float64) string { return strings.TrimRight(strings.TrimRight(fmtG(f), "0"), ".") }
func fmtG(f float64) string { return strconv.FormatFloat(f, 'f', 6, 64) }

func TestLookupDelayHistogramIsReadSummedOverEngines(t *testing.T) {
	r, err := Parse(strings.NewReader(lookupText(2, 1, 0, 4.5)), expfmt.NewFormat(expfmt.TypeTextPlain))
	if err != nil {
		t.Fatal(err)
	}
	h := r.LookupAsync
	if h == nil || h.Count != 4 || h.Sum != 5 {
		t.Fatalf("lookup async = %+v, want count 4 (3 + 1) and sum 5 (4.5 + 0.5)", h)
	}
	want := []event.Bucket{{Le: 0.1, N: 0}, {Le: 1, N: 3}, {Le: 5, N: 4}, {Le: 10, N: 4}}
	if len(h.Buckets) != len(want) {
		t.Fatalf("buckets %+v, want %+v", h.Buckets, want)
	}
	for i := range want {
		if h.Buckets[i] != want[i] {
			t.Fatalf("buckets %+v, want %+v", h.Buckets, want)
		}
	}
	if r.LookupSync != nil {
		t.Errorf("sync delay %+v read, but the engine does not export it", r.LookupSync)
	}
}

func TestLookupDelayOverAWindowIsWhatItGained(t *testing.T) {
	read := func(s string) event.Reading {
		r, err := Parse(strings.NewReader(s), expfmt.NewFormat(expfmt.TypeTextPlain))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	pts := []Point{
		{T: 0, Reading: read(lookupText(4, 0, 0, 2))},
		{T: time.Second, Reading: read(lookupText(4, 2, 0, 2+6))},
		{T: 2 * time.Second, Reading: read(lookupText(4, 4, 1, 2+6+6+14))},
	}
	d := Window(pts, 0, 3*time.Second).LookupAsync
	// Gained: 4 lookups of 3 s in (1, 5] and one of 14 s past 10 s.
	if !d.Exported || d.N != 5 || math.Abs(d.Mean.V-26.0/5) > 1e-9 {
		t.Fatalf("delay %+v, want 5 lookups, mean 5.2 s", d)
	}
	// The median's rank 2.5 falls in (1, 5], at 2.5 of its 4: 1 + 4*2.5/4.
	if math.Abs(d.P50.V-3.5) > 1e-9 {
		t.Errorf("p50 %v, want 3.5 (histogram_quantile within (1, 5])", d.P50)
	}
	if !d.Over || d.Max.V != 10 {
		t.Errorf("max %v over %v, want past the highest bound, 10 s", d.Max, d.Over)
	}
	quiet := Window(pts[:1], 0, time.Second).LookupAsync
	if !quiet.Exported || quiet.N != 0 || quiet.Mean.OK {
		t.Errorf("one scrape: %+v, want exported and nothing observed", quiet)
	}
	none := Window([]Point{{T: 0}, {T: time.Second}}, 0, 2*time.Second).LookupAsync
	if none.Exported {
		t.Errorf("an engine without the series: %+v, want not exported", none)
	}
}
