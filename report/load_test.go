package report

import (
	"math"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// busyFixture is a busy window on source-0 from 10 s to 40 s: its pulls
// take 2 s, the healthy source's 20 ms; the load's reports; and the
// decoder's async lookup delay scraped once a second, 4 lookups a second
// of 10 ms outside the window and, inside, 2 of 10 ms (the healthy
// source's) and 2 of 1.5 s (the busy one's).
func busyFixture() []event.Event {
	w := stallWindow()
	w.Kind = "busy"
	f := seedRun("main", "none", w, 60, func(int) time.Duration { return 2 * time.Second }, 20*ms, 50, 50)
	evs := f.events()
	for i := range evs {
		if evs[i].Window != nil {
			k := *evs[i].Window
			k.Kind = "busy"
			evs[i].Window = &k
		}
	}
	load := func(t time.Duration, final bool, c event.LoadCounts) event.Event {
		l := event.LoadInfo{Kind: "busy", Source: 0, Concurrency: 16, PromptTokens: 511, MaxTokens: 1, Start: w.Start, Final: final, LoadCounts: c}
		if final {
			l.End = w.End
		}
		return event.Event{T: t, Kind: event.KindLoad, Load: &l}
	}
	evs = append(evs,
		load(11*time.Second, false, event.LoadCounts{Sent: 40, Answered: 24, InFlight: 16, P50: 600 * ms, Max: 900 * ms}),
		load(40*time.Second, true, event.LoadCounts{Sent: 800, Answered: 784, Cancelled: 16, P50: 610 * ms, Max: 1400 * ms}))
	var fast, slow float64
	for k := 0; k <= 70; k++ {
		if k > 0 {
			if s := time.Duration(k-1) * time.Second; s >= w.Start && s < w.End {
				fast, slow = fast+2, slow+2
			} else {
				fast += 4
			}
		}
		h := &event.Histogram{Count: fast + slow, Sum: 0.01*fast + 1.5*slow, Buckets: []event.Bucket{
			{Le: 0.01, N: fast}, {Le: 0.05, N: fast}, {Le: 0.1, N: fast}, {Le: 0.5, N: fast}, {Le: 1, N: fast}, {Le: 5, N: fast + slow}, {Le: 10, N: fast + slow}}}
		m := event.MetricsInfo{Engine: DecoderEngine, Reading: event.Reading{LookupAsync: h}}
		evs = append(evs, event.Event{T: time.Duration(k) * time.Second, Kind: event.KindMetrics, Metrics: &m})
	}
	return evs
}

func TestBusyRowCarriesItsLoadAndTheDecodersLookupDelay(t *testing.T) {
	r, err := FromEvents(busyFixture())
	if err != nil {
		t.Fatal(err)
	}
	row := r.Row()
	if len(row.Loads) != 1 {
		t.Fatalf("loads %+v, want the one load, its final report", row.Loads)
	}
	l := row.Loads[0]
	if l.Sent != 800 || l.Answered != 784 || l.Cancelled != 16 || l.End != 40 || l.P50 != 0.61 || l.Max != 1.4 {
		t.Errorf("load %+v, want its final counts", l)
	}
	if len(row.Lookup) != 3 {
		t.Fatalf("lookup rows %+v, want baseline, the window, after it", row.Lookup)
	}
	base, win, after := row.Lookup[0], row.Lookup[1], row.Lookup[2]
	if base.Window != "baseline" || base.Delay.N != 36 || math.Abs(base.Delay.Mean.V-0.01) > 1e-9 {
		t.Errorf("baseline %+v, want 36 lookups of 10 ms (scrapes 0..9 s)", base)
	}
	// The window's scrapes 10..39 s span 29 seconds of 2 + 2 lookups.
	if win.Window != "1: busy source-0" || win.Delay.N != 116 || math.Abs(win.Delay.Mean.V-87.58/116) > 1e-9 {
		t.Errorf("window %+v, want 116 lookups, mean 87.58/116 s", win)
	}
	if !win.Delay.Max.OK || win.Delay.Max.V != 5 || win.Delay.Over {
		t.Errorf("window max %v over %v, want the (1, 5] bucket", win.Delay.Max, win.Delay.Over)
	}
	// Less the 60 healthy pulls at the baseline's 10 ms, over 60 faulted
	// pulls of 2 s.
	want := (87.58 - 60*0.01) / 120
	if win.FaultedN != 60 || win.FaultedMean != 2 || win.Share == nil || math.Abs(*win.Share-want) > 1e-9 {
		t.Errorf("window faulted %d mean %v share %v, want 60 of 2 s, share %.4f", win.FaultedN, win.FaultedMean, win.Share, want)
	}
	if after.Window != "1: after" || after.Share != nil || after.Delay.N == 0 {
		t.Errorf("after %+v, want its own span, no share", after)
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, row); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"| main | none | busy 16x511 | source-0 | 10.0 s | 40.0 s | 800 | 784 | 0 | 16 | 610.0 ms / 1.40 s |",
		"| main | none | 1: busy source-0 | 116 | 10.0 ms | ≤ 5.00 s | 755.0 ms | 60, 2.00 s | 72% |",
	} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("report.md lacks %q:\n%s", s, md.String())
		}
	}
	if tab := Tables([]Row{row}); !strings.Contains(tab, "busy 16x511") || !strings.Contains(tab, "lookup share") {
		t.Errorf("the terminal's tables lack the load or the lookup delay:\n%s", tab)
	}
}

func TestNoLookupTableWhenTheDecoderDoesNotExportIt(t *testing.T) {
	r := mainStall().run(t)
	if rows := lookupRows(r); rows != nil {
		t.Errorf("lookup rows %+v for a stream without the histogram, want none", rows)
	}
}

// TestALookupSpanNamesTheRankItsFaultActedOn: a window of a fault on one
// rank names that rank in the lookup table, as the why table does.
func TestALookupSpanNamesTheRankItsFaultActedOn(t *testing.T) {
	evs := busyFixture()
	for i := range evs {
		if evs[i].Window != nil {
			k := *evs[i].Window
			k.Kind, k.Target = "stall", "source-0/rank1"
			evs[i].Window = &k
		}
	}
	r, err := FromEvents(evs)
	if err != nil {
		t.Fatal(err)
	}
	if l := r.Row().Lookup; len(l) < 2 || l[1].Window != "1: stall source-0/rank1" {
		t.Errorf("lookup spans %+v, want the window named 1: stall source-0/rank1", l)
	}
}
