package scrape

import (
	"encoding/json"
	"strings"
	"testing"

	"p2pfault/event"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// vllmText is /metrics as vLLM's prometheus_client writes it (text format
// 0.0.4): counters with their _created samples, histograms, two engines of
// data parallelism, and both offload tiers.
const vllmText = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
# HELP vllm:external_prefix_cache_queries_total External prefix cache queries, in tokens.
# TYPE vllm:external_prefix_cache_queries_total counter
vllm:external_prefix_cache_queries_total{engine="0",model_name="m"} 4000.0
vllm:external_prefix_cache_queries_total{engine="1",model_name="m"} 800.0
# HELP vllm:external_prefix_cache_queries_created External prefix cache queries, in tokens.
# TYPE vllm:external_prefix_cache_queries_created gauge
vllm:external_prefix_cache_queries_created{engine="0",model_name="m"} 1.7e+09
# HELP vllm:external_prefix_cache_hits_total External prefix cache hits, in tokens.
# TYPE vllm:external_prefix_cache_hits_total counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 3072.0
vllm:external_prefix_cache_hits_total{engine="1",model_name="m"} 384.0
# HELP vllm:kv_offload_tiering_read_bytes_total Bytes read from an offload tier.
# TYPE vllm:kv_offload_tiering_read_bytes_total counter
vllm:kv_offload_tiering_read_bytes_total{model_name="m",tier="0:primary"} 1.048576e+06
vllm:kv_offload_tiering_read_bytes_total{model_name="m",tier="1:p2p"} 2.5165824e+07
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 12.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 12.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.53
`

// noneText exports none of the series read: an engine built without them.
const noneText = `# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m"} 1600
# HELP vllm:kv_offload_tiering_read_bytes_total Bytes read from an offload tier.
# TYPE vllm:kv_offload_tiering_read_bytes_total counter
vllm:kv_offload_tiering_read_bytes_total{model_name="m",tier="0:primary"} 1024
`

var textFormat = expfmt.NewFormat(expfmt.TypeTextPlain)

func TestParseSumsMatchingLabelSets(t *testing.T) {
	r, err := Parse(strings.NewReader(vllmText), textFormat)
	if err != nil {
		t.Fatal(err)
	}
	want := event.Reading{Running: event.MetricOf(4), Waiting: event.MetricOf(7), ExtHits: event.MetricOf(3456), ExtQueries: event.MetricOf(4800), P2PReadBytes: event.MetricOf(25165824)}
	if r != want {
		t.Errorf("got %+v\nwant %+v", r, want)
	}
}

func TestParseSeriesNotExportedAreAbsentNotZero(t *testing.T) {
	r, err := Parse(strings.NewReader(noneText), textFormat)
	if err != nil {
		t.Fatal(err)
	}
	// The primary tier's bytes are exported, the P2P tier's are not.
	if r != (event.Reading{}) {
		t.Errorf("got %+v, want every series absent", r)
	}
	for _, v := range []event.MetricValue{r.Running, r.Waiting, r.ExtHits, r.ExtQueries, r.P2PReadBytes} {
		if v.String() != "–" {
			t.Errorf("absent value shows %q, want –", v.String())
		}
	}
	if r, err := Parse(strings.NewReader(""), textFormat); err != nil || r != (event.Reading{}) {
		t.Errorf("empty exposition: %+v, %v; want all absent, no error", r, err)
	}
}

func TestParseOpenMetrics(t *testing.T) {
	om := `# TYPE vllm:external_prefix_cache_hits counter
vllm:external_prefix_cache_hits_total{model_name="m"} 384
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 2
# EOF
`
	r, err := Parse(strings.NewReader(om), omFormat(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.ExtHits != event.MetricOf(384) || r.Waiting != event.MetricOf(2) || r.Running.OK {
		t.Errorf("got %+v, want hits 384, waiting 2, running absent", r)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	_, err := Parse(strings.NewReader("<html>not metrics</html>\n"), textFormat)
	if err == nil || !strings.Contains(err.Error(), "parse metrics") {
		t.Errorf("err = %v, want a parse error", err)
	}
}

func TestValueJSONAndString(t *testing.T) {
	b, err := json.Marshal(event.Reading{Running: event.MetricOf(2), Waiting: event.MetricOf(0)})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"running":2,"waiting":0,"ext_hits":null,"ext_queries":null,"p2p_read_bytes":null}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back event.Reading
	if err := json.Unmarshal(b, &back); err != nil || back != (event.Reading{Running: event.MetricOf(2), Waiting: event.MetricOf(0)}) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	if s := event.MetricOf(0).String() + " " + event.MetricOf(1.5).String() + " " + (event.MetricValue{}).String(); s != "0 1.5 –" {
		t.Errorf("String: %q", s)
	}
	if err := json.Unmarshal([]byte(`"x"`), new(event.MetricValue)); err == nil {
		t.Error(`"x" read as a value`)
	}
}

func omFormat(t *testing.T) expfmt.Format {
	f, err := expfmt.NewOpenMetricsFormat(expfmt.OpenMetricsVersion_1_0_0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFilterKeepsWhatIsRead: the line filter in front of the parser must
// not change a event.Reading, whatever else the exposition holds.
func TestFilterKeepsWhatIsRead(t *testing.T) {
	body := vllmSized()
	filtered, err := Parse(strings.NewReader(body), textFormat)
	if err != nil {
		t.Fatal(err)
	}
	// The same exposition through expfmt's parser alone.
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(fams) < 40 {
		t.Fatalf("the sized exposition has %d families, want about 45", len(fams))
	}
	full := event.Reading{
		Running: sum(fams[SeriesRunning], nil), Waiting: sum(fams[SeriesWaiting], nil),
		ExtHits: sum(fams[SeriesExtHits], nil), ExtQueries: sum(fams[SeriesExtQueries], nil),
		P2PReadBytes: sum(fams[SeriesTierRead], func(m *dto.Metric) bool { return label(m, TierLabel) == TierP2P }),
	}
	if filtered != full || !full.P2PReadBytes.OK {
		t.Errorf("filtered %+v\nunfiltered %+v", filtered, full)
	}
	// A malformed line of a family that is read is still an error.
	if _, err := Parse(strings.NewReader("vllm:num_requests_waiting{model_name=\"m\"} lots\n"), textFormat); err == nil {
		t.Error("a bad value of a read series parsed")
	}
}

// TestParseParkedStoresSumsTheirKinds: the sim's parked-store gauges are
// read summed over their kinds (and engines); an exposition without them
// (vLLM's) leaves them absent, and out of the reading's JSON.
func TestParseParkedStoresSumsTheirKinds(t *testing.T) {
	const text = `# TYPE sim:p2p_parked_stores gauge
sim:p2p_parked_stores{model_name="m",engine="0",kind="unbound"} 16
sim:p2p_parked_stores{model_name="m",engine="0",kind="lookup"} 2
# TYPE sim:p2p_pinned_blocks gauge
sim:p2p_pinned_blocks{model_name="m",engine="0",kind="unbound"} 48
sim:p2p_pinned_blocks{model_name="m",engine="0",kind="lookup"} 6
`
	r, err := Parse(strings.NewReader(text), textFormat)
	if err != nil {
		t.Fatal(err)
	}
	if r.ParkedStores != event.MetricOf(18) || r.PinnedBlocks != event.MetricOf(54) {
		t.Errorf("parked %v, pinned %v; want 18, 54", r.ParkedStores, r.PinnedBlocks)
	}
	r, err = Parse(strings.NewReader(vllmText), textFormat)
	if err != nil {
		t.Fatal(err)
	}
	if r.ParkedStores.OK || r.PinnedBlocks.OK {
		t.Errorf("vLLM's exposition gave parked %v, pinned %v; want both absent", r.ParkedStores, r.PinnedBlocks)
	}
	if b, _ := json.Marshal(r); strings.Contains(string(b), "parked") || strings.Contains(string(b), "pinned") {
		t.Errorf("absent parked stores in JSON: %s", b)
	}
}
