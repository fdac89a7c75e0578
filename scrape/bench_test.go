package scrape

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// vllmSized is an exposition the size of a real vLLM's: the series read
// plus the histograms and counters vLLM v1 exports (about 40 families,
// most of them histograms of 10-30 buckets), for two engines.
func vllmSized() string {
	var b strings.Builder
	b.WriteString(vllmText)
	for h := range 30 {
		name := fmt.Sprintf("vllm:histogram_%d_seconds", h)
		fmt.Fprintf(&b, "# HELP %s A histogram.\n# TYPE %s histogram\n", name, name)
		for e := range 2 {
			for k := range 20 {
				fmt.Fprintf(&b, "%s_bucket{engine=\"%d\",le=\"%g\",model_name=\"meta-llama/Llama-3.2-1B-Instruct\"} %d.0\n", name, e, 0.001*float64(int(1)<<k), k*10)
			}
			fmt.Fprintf(&b, "%s_bucket{engine=\"%d\",le=\"+Inf\",model_name=\"meta-llama/Llama-3.2-1B-Instruct\"} 200.0\n", name, e)
			fmt.Fprintf(&b, "%s_count{engine=\"%d\",model_name=\"meta-llama/Llama-3.2-1B-Instruct\"} 200.0\n", name, e)
			fmt.Fprintf(&b, "%s_sum{engine=\"%d\",model_name=\"meta-llama/Llama-3.2-1B-Instruct\"} 12.5\n", name, e)
		}
	}
	for c := range 10 {
		name := fmt.Sprintf("vllm:counter_%d_total", c)
		fmt.Fprintf(&b, "# HELP %s A counter.\n# TYPE %s counter\n", name, name)
		for e := range 2 {
			fmt.Fprintf(&b, "%s{engine=\"%d\",model_name=\"meta-llama/Llama-3.2-1B-Instruct\"} %d.0\n", name, e, c*1000)
		}
	}
	return b.String()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkParse is the client's share of one scrape: parsing one
// vLLM-sized exposition.
func BenchmarkParse(b *testing.B) {
	body := vllmSized()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := Parse(strings.NewReader(body), textFormat); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/engine")
}

// BenchmarkScrape9Engines is one round of Run over 9 engines (8 sources
// and a decoder), each serving a vLLM-sized exposition from an httptest
// server, scraped concurrently as Run does. The CPU figure is the whole
// process's (the test servers' share included): an upper bound of what a
// round costs p2pfault; at one round a second it is the fraction of a core.
func BenchmarkScrape9Engines(b *testing.B) {
	body := vllmSized()
	var targets []Target
	for i := range 9 {
		url := serveB(b, text(body))
		targets = append(targets, Target{Name: fmt.Sprintf("e%d", i), URL: url})
	}
	s, err := New(Config{Targets: targets})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		var wg sync.WaitGroup
		for i := range targets {
			wg.Go(func() {
				if _, err := s.Fetch(ctx, s.urls[i]); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	cpu := float64((cpuTime() - cpu0).Microseconds()) / float64(b.N)
	b.ReportMetric(cpu, "cpu-µs/round")
	b.ReportMetric(cpu/1e4, "%core@1/s")
	b.ReportMetric(float64(len(body)), "bytes/engine")
}

func serveB(b *testing.B, h http.HandlerFunc) string {
	b.Helper()
	srv := newServer(h)
	b.Cleanup(srv.Close)
	return srv.URL
}
