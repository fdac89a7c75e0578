package probe

import (
	"sort"
	"sync"
	"time"

	"p2pfault/event"
)

// InFlight is the pulls in flight, by trial: a face feeds it every
// event.PullStart and every event.Sample, in the order they happened, and asks it what
// is pending per source. Its methods are safe for concurrent use.
type InFlight struct {
	mu      sync.Mutex
	pending map[int64]event.PullStart
}

// NewInFlight returns an empty tracker.
func NewInFlight() *InFlight { return &InFlight{pending: map[int64]event.PullStart{}} }

// Started records a pull sent.
func (f *InFlight) Started(p event.PullStart) {
	f.mu.Lock()
	f.pending[p.Trial] = p
	f.mu.Unlock()
}

// Ended records a trial's event.Sample. A sample with no event.PullStart (a trial not
// sent because the in-flight cap was hit) is ignored.
func (f *InFlight) Ended(s event.Sample) {
	f.mu.Lock()
	delete(f.pending, s.Trial)
	f.mu.Unlock()
}

// Pending is what is in flight for one source at a time now.
type Pending struct {
	Source int
	N      int           // pulls in flight
	Oldest time.Duration // age of the oldest one at now
	Starts []time.Duration
}

// Snapshot gives, per source with pulls in flight, how many and the oldest
// one's age at now (since t0, as event.PullStart.Start), sorted by source. Starts
// lists their start times in order, for a chart that draws them live.
func (f *InFlight) Snapshot(now time.Duration) []Pending {
	f.mu.Lock()
	by := map[int]*Pending{}
	for _, p := range f.pending {
		pd := by[p.Source]
		if pd == nil {
			pd = &Pending{Source: p.Source}
			by[p.Source] = pd
		}
		pd.N++
		pd.Starts = append(pd.Starts, p.Start)
	}
	f.mu.Unlock()
	out := make([]Pending, 0, len(by))
	for _, pd := range by {
		sort.Slice(pd.Starts, func(i, j int) bool { return pd.Starts[i] < pd.Starts[j] })
		pd.Oldest = max(now-pd.Starts[0], 0)
		out = append(out, *pd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	return out
}

// Len is the number of pulls in flight over all sources.
func (f *InFlight) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}
