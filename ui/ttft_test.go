package ui

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

func TestSourcePanelShowsTTFTOnlyWhenStreaming(t *testing.T) {
	at := 9 * time.Second
	plain := feed(t, withEvents(sceneSteady(), at), 120, 40)
	if strings.Contains(plain.View(), "ttft") {
		t.Errorf("a run without streamed pulls shows TTFT:\n%s", plain.View())
	}
	var samples []event.Sample
	for k, ttft := range []time.Duration{1250 * time.Millisecond, 400 * time.Millisecond, 2500 * time.Millisecond} {
		samples = append(samples, event.Sample{Source: 0, Trial: int64(1000 + k), Start: at - 4*time.Second, Latency: ttft + 10*time.Millisecond,
			TTFT: ttft, Status: 200, PromptTokens: 400, CachedTokens: 384})
	}
	m := feed(t, withEvents(sceneSteady(), at, event.Event{Kind: event.KindSamples, Samples: samples}), 120, 40)
	st := m.sourcePanel(0, m.nowT()).ttft
	if !st.streamed || st.n != 3 || st.p50 != 1250*time.Millisecond || st.max != 2500*time.Millisecond {
		t.Errorf("source 0 TTFT %+v", st)
	}
	if !strings.Contains(m.View(), "ttft p50 1.25s  max 2.50s") {
		t.Errorf("view lacks source 0's TTFT:\n%s", m.View())
	}
	if other := m.sourcePanel(1, m.nowT()).ttft; other.streamed {
		t.Errorf("source 1 had no streamed pull: %+v", other)
	}
}
