package cli_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/exporter"
)

// promSeries is one series of a Prometheus API answer: its labels and its
// samples (one for an instant query).
type promSeries struct {
	Metric map[string]string
	Values []promPoint
}

type promPoint struct {
	T float64 // Unix seconds
	V float64
}

// promAPI asks Prometheus' HTTP API at base (path, params) and returns the
// series of a vector or matrix answer, or its error.
func promAPI(base, path string, params url.Values) ([]promSeries, error) {
	resp, err := http.Get(base + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
				Values [][]any           `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("%s: %v: %s", path, err, body)
	}
	if ans.Status != "success" {
		return nil, fmt.Errorf("%s: %s", path, ans.Error)
	}
	point := func(p []any) promPoint {
		t, _ := p[0].(float64)
		s, _ := p[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			v = math.NaN()
		}
		return promPoint{T: t, V: v}
	}
	var out []promSeries
	for _, r := range ans.Data.Result {
		s := promSeries{Metric: r.Metric}
		if r.Value != nil {
			s.Values = append(s.Values, point(r.Value))
		}
		for _, p := range r.Values {
			s.Values = append(s.Values, point(p))
		}
		out = append(out, s)
	}
	return out, nil
}

// TestPrometheusScrapesAStall is the exporter in the monitoring people
// run: Debian's prometheus, started here on a loopback port with a 250 ms
// scrape of p2pfault's --metrics-listen and of the decoder's own /metrics,
// watches main's stall on the simulated cluster at time scale 0.1. Then it
// is asked in PromQL: the pulls in flight on source-0 rose while the fault
// was in force, faulted_max went to 0 while it was, the window counter
// counted the failed window, the latency histogram's p50 and p99 fall in
// the bucket of the run's own (exact, from events.jsonl), and every query
// of docs/grafana/p2pfault.json parses, those on p2pfault's series with
// data. promtool checks a scrape taken during the stall.
func TestPrometheusScrapesAStall(t *testing.T) {
	t.Parallel() // shares nothing (main_test.go: parallel tests)
	if testing.Short() {
		t.Skip("starts prometheus and a cluster for ~15 s")
	}
	prom, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not on PATH (Debian's package prometheus; .ci/run installs it): skipping the test against a real Prometheus")
	}
	dir := t.TempDir()
	promPort, metricsPort, decoderPort := loopbackPort(t), loopbackPort(t), loopbackPort(t)
	config := fmt.Sprintf(`global:
  scrape_interval: 250ms
  scrape_timeout: 200ms
scrape_configs:
  - job_name: p2pfault
    static_configs: [{targets: ["127.0.0.1:%d"]}]
  - job_name: vllm
    static_configs: [{targets: ["127.0.0.1:%d"]}]
`, metricsPort, decoderPort)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	_, promLog := startCommand(t, prom, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
	waitHTTP200(t, base+"/-/ready", 30*time.Second, promLog)
	// Prometheus applies its targets some seconds after it is ready: wait
	// until it has tried p2pfault's address once (down, so far), so that
	// the run is scraped from its start.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s, err := promAPI(base, "/api/v1/query", url.Values{"query": {`up{job="p2pfault"}`}}); err == nil && len(s) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus never scraped its p2pfault target\n%s", promLog)
		}
		time.Sleep(100 * time.Millisecond)
	}

	out := filepath.Join(dir, "run")
	start := time.Now()
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	cmd, log := startP2pfault(t, "run", "--headless", "--case", "stall", "--time-scale", "0.1", "--free-ports",
		"--decoder-port", strconv.Itoa(decoderPort), "--engine-arg=--sim-startup-delay=0s", "--out", out,
		"--metrics-listen", fmt.Sprintf("127.0.0.1:%d", metricsPort))
	stalled := scrapeDuringStall(t, metricsURL, 90*time.Second, log)
	if code := waitExit(t, cmd, 90*time.Second, log); code != 1 {
		t.Fatalf("main's stall exited %d, want 1 (faulted_max fails)\n%s", code, log)
	}
	end := time.Now()
	if !strings.Contains(log.String(), "metrics: serving the run's last figures") {
		t.Errorf("p2pfault did not wait for a last scrape after the run:\n%s", log)
	}
	checkPromtool(t, stalled)

	rangeQuery := func(q string) []promSeries {
		t.Helper()
		s, err := promAPI(base, "/api/v1/query_range", url.Values{"query": {q},
			"start": {ts(start)}, "end": {ts(end)}, "step": {"0.25"}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	instant := func(q string) []promSeries {
		t.Helper()
		s, err := promAPI(base, "/api/v1/query", url.Values{"query": {q}, "time": {ts(end)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("PromQL %s\n  => %s", q, answer(s))
		return s
	}

	// When the fault was in force, by Prometheus' own samples of it.
	const faultQ = `p2pfault_fault_start_timestamp_seconds{kind="stall",source="source-0"}`
	fault := rangeQuery(faultQ)
	if len(fault) != 1 {
		t.Fatalf("%s: %d series, want 1\n%s", faultQ, len(fault), log)
	}
	inForce := map[float64]bool{}
	for _, p := range fault[0].Values {
		inForce[p.T] = true
	}
	first := slices.MinFunc(fault[0].Values, func(a, b promPoint) int { return cmp.Compare(a.T, b.T) }).T
	t.Logf("PromQL %s (range, step 0.25s)\n  => in force at %d steps, from %s", faultQ, len(inForce), time.Unix(int64(first), 0).UTC().Format(time.TimeOnly))

	const inFlightQ = `p2pfault_pulls_in_flight{source="source-0"}`
	var during, before float64
	for _, s := range rangeQuery(inFlightQ) {
		for _, p := range s.Values {
			if inForce[p.T] {
				during = max(during, p.V)
			} else if p.T < first {
				before = max(before, p.V)
			}
		}
	}
	t.Logf("PromQL %s (range)\n  => max %g while the stall was in force, %g before it", inFlightQ, during, before)
	if during < 5 || during <= before {
		t.Errorf("pulls in flight on source-0: max %g during the stall, %g before: want it to rise (at least 5)", during, before)
	}

	const verdictQ = `p2pfault_check_passed{check="faulted_max",window="1"}`
	failedInForce := false
	for _, s := range rangeQuery(verdictQ) {
		for _, p := range s.Values {
			failedInForce = failedInForce || p.V == 0 && inForce[p.T]
		}
	}
	t.Logf("PromQL %s (range)\n  => 0 while the stall was in force: %v", verdictQ, failedInForce)
	if !failedInForce {
		t.Errorf("faulted_max of window 1 never read 0 while the stall was in force")
	}
	if s := instant(`min_over_time(p2pfault_check_passed{check="faulted_max",window="run"}[10m])`); len(s) != 1 || s[0].Values[0].V != 0 {
		t.Errorf("the run's faulted_max never went to 0")
	}
	if s := instant(`last_over_time(p2pfault_windows_judged_total{kind="stall",result="failed"}[10m])`); len(s) != 1 || s[0].Values[0].V != 1 {
		t.Errorf("the failed stall window was not counted once")
	}
	if s := instant(`last_over_time(p2pfault_windows_judged_total{kind="stall",result="passed"}[10m])`); len(s) != 1 || s[0].Values[0].V != 0 {
		t.Errorf("want the stall's passed windows at 0: %s", answer(s))
	}

	// The histogram's quantiles against the run's own, exact, over the
	// same pulls (those sent: a pull_start and its sample).
	lat := pullLatencies(t, filepath.Join(out, "events.jsonl"))
	for _, q := range []float64{0.5, 0.99} {
		exact := lat[int(math.Ceil(q*float64(len(lat))))-1]
		query := fmt.Sprintf(`histogram_quantile(%g, sum by (le) (last_over_time(p2pfault_pull_duration_seconds_bucket[10m])))`, q)
		s := instant(query)
		if len(s) != 1 {
			t.Fatalf("%s: %d series", query, len(s))
		}
		est := s[0].Values[0].V
		lo, hi := bucketOf(est)
		t.Logf("  run's own p%g over %d pulls: %.4fs; histogram: %.4fs, bucket (%g, %g]", q*100, len(lat), exact.Seconds(), est, lo, hi)
		if exact.Seconds() < lo || exact.Seconds() > hi {
			t.Errorf("p%g: the run's own %.4fs is not in the bucket (%g, %g] of the histogram's %.4fs", q*100, exact.Seconds(), lo, hi, est)
		}
	}

	// Every query of the dashboard parses on this Prometheus over the
	// run, and those on p2pfault's series have data; so do vLLM's series
	// that the simulated decoder exports.
	for _, q := range dashboardQueries(t) {
		expr := grafanaVars.Replace(q)
		s, err := promAPI(base, "/api/v1/query_range", url.Values{"query": {expr},
			"start": {ts(start)}, "end": {ts(end)}, "step": {"0.5"}})
		if err != nil {
			t.Errorf("dashboard query %s: %v", q, err)
			continue
		}
		t.Logf("dashboard %s\n  => %s", expr, answer(s))
		if len(s) == 0 && !strings.Contains(q, "lookup_async_delay") { // the sim does not export vLLM's lookup delay
			t.Errorf("dashboard query %s: no data", q)
		}
	}
}

// grafanaVars stands in for the dashboard's variables as Grafana fills
// them with "All" selected and a 250 ms scrape.
var grafanaVars = strings.NewReplacer(`$__rate_interval`, "2s", `$arm`, ".*", `$case`, ".*", `$source`, ".*", `$vllm_job`, ".*")

// dashboardQueries are every PromQL expression of docs/grafana/p2pfault.json:
// its panels' targets, its annotations' and the series its variables'
// label_values read.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "grafana", "p2pfault.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Annotations struct {
			List []struct {
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var qs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, tg.Expr)
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			qs = append(qs, a.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range d.Templating.List {
		q, ok := v.Query.(map[string]any)
		if v.Type != "query" || !ok {
			continue
		}
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("variable query %q is not label_values(SELECTOR, LABEL)", s)
			continue
		}
		qs = append(qs, m[1])
	}
	if len(qs) < 15 {
		t.Fatalf("only %d queries in the dashboard", len(qs))
	}
	return qs
}

// answer sums up an API answer for the log: each series' labels (less
// the instance, a port of the test's) and its last value.
func answer(s []promSeries) string {
	if len(s) == 0 {
		return "no data"
	}
	var parts []string
	for i, x := range s {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("... %d series in all", len(s)))
			break
		}
		var ls []string
		for k, v := range x.Metric {
			if k != "instance" {
				ls = append(ls, k+"="+v)
			}
		}
		slices.Sort(ls)
		last := math.NaN()
		if n := len(x.Values); n > 0 {
			last = x.Values[n-1].V
		}
		parts = append(parts, fmt.Sprintf("{%s} %.4g", strings.Join(ls, ","), last))
	}
	return strings.Join(parts, "; ")
}

func ts(t time.Time) string { return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64) }

// bucketOf is the latency bucket (lo, hi] that holds v seconds.
func bucketOf(v float64) (lo, hi float64) {
	for _, b := range exporter.LatencyBuckets {
		if v <= b {
			return lo, b
		}
		lo = b
	}
	return lo, math.Inf(1)
}

// pullLatencies are the latencies of the pulls sent in an events file (a
// pull_start, then its sample), sorted.
func pullLatencies(t *testing.T, path string) []time.Duration {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sent := map[int64]bool{}
	var lat []time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var ev event.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		for _, p := range ev.Pulls {
			sent[p.Trial] = true
		}
		for _, s := range ev.Samples {
			if sent[s.Trial] {
				lat = append(lat, s.Latency)
			}
		}
	}
	if len(lat) < 50 {
		t.Fatalf("%d pulls in %s", len(lat), path)
	}
	slices.Sort(lat)
	return lat
}

// scrapeDuringStall scrapes p2pfault's /metrics until source-0's fault is
// in force with at least 5 pulls hanging and faulted_max failed, logs the lines of p2pfault's own
// series but the histogram's buckets, and returns the scrape.
func scrapeDuringStall(t *testing.T, metricsURL string, limit time.Duration, log *bytes.Buffer) []byte {
	t.Helper()
	hanging := regexp.MustCompile(`(?m)^p2pfault_pulls_in_flight\{[^}]*source="source-0"\} ([0-9]+)$`)
	broken := regexp.MustCompile(`(?m)^p2pfault_check_passed\{[^}]*check="faulted_max"[^}]*window="1"\} 0$`)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		resp, err := http.Get(metricsURL)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := hanging.FindSubmatch(b)
			if m != nil && bytes.Contains(b, []byte(`p2pfault_fault_start_timestamp_seconds{`)) && broken.Match(b) {
				if n, _ := strconv.Atoi(string(m[1])); n >= 5 {
					var lines []string
					for l := range strings.SplitSeq(string(b), "\n") {
						if strings.HasPrefix(l, "p2pfault_") && !strings.Contains(l, "_bucket{") {
							lines = append(lines, l)
						}
					}
					t.Logf("curl %s during the stall (p2pfault's series, buckets left out):\n%s", metricsURL, strings.Join(lines, "\n"))
					return b
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no scrape of %s with source-0's stall in force, 5 pulls hanging and faulted_max failed within %v\n%s", metricsURL, limit, log)
	return nil
}

// checkPromtool runs `promtool check metrics` on a scrape: no problem
// found (promtool ships in the prometheus package; without it, say so).
func checkPromtool(t *testing.T, scrape []byte) {
	t.Helper()
	tool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool is not on PATH: the scrape's lint is left out")
		return
	}
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	out, err := cmd.CombinedOutput()
	t.Logf("promtool check metrics: exit %v, %q", cmd.ProcessState.ExitCode(), out)
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics on the stall's scrape: %v\n%s", err, out)
	}
}

// waitHTTP200 waits until url answers 200.
func waitHTTP200(t *testing.T, url string, limit time.Duration, log *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within %v\n%s", url, limit, log)
}
