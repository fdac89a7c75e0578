package ui

import (
	"testing"
	"time"

	"p2pfault/event"
)

func TestRingKeepsTheNewestItemsUpToItsLimit(t *testing.T) {
	tests := []struct {
		name             string
		limit, pushes    int
		wantLen, wantOld int
	}{
		{name: "under the limit keeps all", limit: 100, pushes: 40, wantLen: 40, wantOld: 0},
		{name: "at the limit keeps all", limit: 16, pushes: 16, wantLen: 16, wantOld: 0},
		{name: "over the limit drops the oldest", limit: 10, pushes: 1000, wantLen: 10, wantOld: 990},
		{name: "an odd limit past growth", limit: 37, pushes: 100, wantLen: 37, wantOld: 63},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing[int](tt.limit)
			for i := 0; i < tt.pushes; i++ {
				r.Push(i)
			}
			if r.Len() != tt.wantLen {
				t.Fatalf("Len = %d, want %d", r.Len(), tt.wantLen)
			}
			if r.Front() != tt.wantOld || r.Back() != tt.pushes-1 {
				t.Errorf("Front, Back = %d, %d; want %d, %d", r.Front(), r.Back(), tt.wantOld, tt.pushes-1)
			}
			if cap(r.buf) > tt.limit {
				t.Errorf("backing array grew to %d past the limit %d", cap(r.buf), tt.limit)
			}
			for i := 1; i < r.Len(); i++ {
				if r.At(i) != r.At(i-1)+1 {
					t.Fatalf("items out of order at %d: %d after %d", i, r.At(i), r.At(i-1))
				}
			}
			r.PopFront()
			if r.Len() != tt.wantLen-1 || (r.Len() > 0 && r.Front() != tt.wantOld+1) {
				t.Errorf("PopFront left Len %d Front %d", r.Len(), r.Front())
			}
		})
	}
}

func TestSamplesOlderThanTheWindowsShownAreDropped(t *testing.T) {
	tests := []struct {
		name       string
		keep       time.Duration
		limit      int
		rate       time.Duration // between pulls, per source
		run        time.Duration
		wantAtMost int
	}{
		{name: "one hour at 2/s keeps a minute", keep: time.Minute, limit: 16384, rate: 500 * time.Millisecond, run: time.Hour, wantAtMost: 122},
		{name: "one hour at 50/s keeps a minute", keep: time.Minute, limit: 16384, rate: 20 * time.Millisecond, run: time.Hour, wantAtMost: 3001},
		{name: "the count bound holds when the window would not", keep: time.Hour, limit: 500, rate: 20 * time.Millisecond, run: 10 * time.Minute, wantAtMost: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newState(tt.limit, 100)
			batch := make([]event.Sample, 0, 64)
			for at := time.Duration(0); at < tt.run; at += tt.rate {
				batch = append(batch, event.Sample{Source: 0, Start: at, Latency: 10 * time.Millisecond, Status: 200, CachedTokens: 128})
				if len(batch) == cap(batch) {
					st.apply(event.Event{Kind: event.KindSamples, T: at, Samples: batch}, tt.keep)
					batch = batch[:0]
				}
			}
			src := st.sources[0]
			if got := src.points.Len(); got > tt.wantAtMost {
				t.Errorf("ring holds %d samples, want at most %d", got, tt.wantAtMost)
			}
			if src.n < int64(tt.run/tt.rate)-int64(cap(batch)) || src.pulled != src.n {
				t.Errorf("run counts lost samples: n=%d pulled=%d", src.n, src.pulled)
			}
		})
	}
}

func TestFeedBatchesWhatIsQueued(t *testing.T) {
	ch := make(chan event.Event, 10)
	for i := 0; i < 5; i++ {
		ch <- event.Event{Seq: int64(i), Kind: event.KindPhase}
	}
	msg, ok := waitEvents(ch, nil, 0)().(eventsMsg)
	if !ok || len(msg.events) != 5 || msg.closed {
		t.Fatalf("got %+v, want one batch of 5 open", msg)
	}
	ch <- event.Event{Seq: 9}
	close(ch)
	msg = waitEvents(ch, nil, 0)().(eventsMsg)
	if len(msg.events) != 1 || !msg.closed {
		t.Errorf("got %d events closed=%v, want the last event and closed", len(msg.events), msg.closed)
	}
	if msg := waitEvents(ch, nil, 0)().(eventsMsg); len(msg.events) != 0 || !msg.closed {
		t.Errorf("a closed channel gave %+v", msg)
	}
}

func TestFeedWaitsAFrameBetweenBatches(t *testing.T) {
	ch := make(chan event.Event, 1)
	ch <- event.Event{Kind: event.KindPhase}
	const frame = 60 * time.Millisecond
	start := time.Now()
	if _, ok := waitEvents(ch, nil, frame)().(eventsMsg); !ok {
		t.Fatal("no batch")
	}
	// At least a frame; the upper bound is generous for a loaded machine.
	if got := time.Since(start); got < frame || got > frame+2*time.Second {
		t.Errorf("batch came after %v, want [%v, %v]", got, frame, frame+2*time.Second)
	}
}

func TestFeedStopsWhenTheDashboardIsDone(t *testing.T) {
	ch := make(chan event.Event)
	done := make(chan struct{})
	got := make(chan any, 1)
	go func() { got <- waitEvents(ch, done, 0)() }()
	close(done)
	select {
	case msg := <-got:
		if msg != nil {
			t.Errorf("got %v, want nil", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the feed kept blocking after done closed")
	}
}
