package ui

import (
	"slices"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// TestSourcePanelBreaksItsStatsDownByDecoder: with two decoders, each
// source panel has a line per decoder ("dec0 p50 ... hits 100%  dec1 ...");
// pulls through a slow decoder-1 stand out there. A run of one decoder
// has no such line.
func TestSourcePanelBreaksItsStatsDownByDecoder(t *testing.T) {
	if v := feed(t, sceneSteady(), 160, 48).View(); strings.Contains(v, "dec0") {
		t.Fatalf("one decoder, yet a line by decoder:\n%s", v)
	}
	sc := sceneSteady()
	for i := range sc.events {
		ev := &sc.events[i]
		if r := ev.Run; r != nil {
			c := *r
			c.Decoders = 2
			ev.Run = &c
		}
		if ev.Kind != event.KindSamples {
			continue
		}
		ss := slices.Clone(ev.Samples)
		for j := range ss {
			if ss[j].Trial%4 >= 2 {
				ss[j].Decoder, ss[j].CachedTokens, ss[j].Latency = 1, 0, 3*time.Second
			}
		}
		ev.Samples = ss
	}
	v := feed(t, sc, 160, 48).View()
	if strings.Count(v, "dec0 p50") != 2 || strings.Count(v, "dec1 p50 3.00s") != 2 || !strings.Contains(v, "hits 0%") {
		t.Errorf("each source panel should break down by decoder, decoder-1's pulls slow and missed:\n%s", v)
	}
}
