package exporter

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"p2pfault/event"
)

// The series read at scrape time: they depend on the present (a pull in
// flight ages, trials fall due), which no event says.
var (
	inFlightDesc = prometheus.NewDesc(namespace+"_pulls_in_flight",
		"Pulls sent and not ended (a pull_start without its sample yet).", sourceLabels, nil)
	oldestDesc = prometheus.NewDesc(namespace+"_pull_oldest_in_flight_age_seconds",
		"Age of the oldest pull in flight (0 when none): how long a stalled source's pulls have hung so far.", sourceLabels, nil)
	dueDesc = prometheus.NewDesc(namespace+"_trials_due_total",
		"Trials the probe's schedule has called for so far (elapsed time since t0 over the run's --interval, per source, phased as the probe phases them; frozen when the probe stops). No event says what the probe was due to send, so this is derived: compare with p2pfault_trials_sent_total.",
		sourceLabels, nil)
)

// scrapeTime collects the scrape-time series of every row.
type scrapeTime struct{ x *Exporter }

func (c scrapeTime) Describe(ch chan<- *prometheus.Desc) {
	ch <- inFlightDesc
	ch <- oldestDesc
	ch <- dueDesc
}

func (c scrapeTime) Collect(ch chan<- prometheus.Metric) {
	x := c.x
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	for _, r := range x.rows {
		n := r.info.Sources
		count := make([]int, n)
		oldest := make([]time.Duration, n)
		has := make([]bool, n)
		for _, p := range r.inflight {
			if p.Source < 0 || p.Source >= n {
				continue
			}
			count[p.Source]++
			if !has[p.Source] || p.Start < oldest[p.Source] {
				oldest[p.Source], has[p.Source] = p.Start, true
			}
		}
		elapsed := r.elapsed(now)
		for i := range n {
			labels := r.with(event.SourceName(i))
			ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(count[i]), labels...)
			age := 0.0
			if has[i] && !r.t0.IsZero() {
				age = max(0, elapsed-oldest[i]).Seconds()
			}
			ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, age, labels...)
			ch <- prometheus.MustNewConstMetric(dueDesc, prometheus.CounterValue, float64(due(elapsed, r.info.Interval, i, n)), labels...)
		}
	}
}

// elapsed is the time since the row's t0 now, or the probe's stop once it
// stopped; 0 before t0.
func (r *row) elapsed(now time.Time) time.Duration {
	switch {
	case r.t0.IsZero():
		return 0
	case r.isDone:
		return r.done
	}
	return max(0, now.Sub(r.t0))
}

// due is how many trials of source i of n the probe has scheduled by
// elapsed: trial k·n+i is due at (k·n+i)·interval/n (probe.Prober.Run).
// Slots skipped while the dashboard paused the probe count as due.
func due(elapsed, interval time.Duration, i, n int) int64 {
	if interval <= 0 || n <= 0 {
		return 0
	}
	first := time.Duration(i) * interval / time.Duration(n)
	if elapsed < first {
		return 0
	}
	return int64((elapsed-first)/interval) + 1
}
