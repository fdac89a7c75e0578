package probe

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// LateAfter is how late against its slot a trial may start before the
// probe says p2pfault itself is behind (issue #41: a loaded machine, or a
// cluster too large for its cores, sends trials late, and then what the
// figures measure is p2pfault's own lag as much as the engines').
const LateAfter = 250 * time.Millisecond

// lag counts the trials sent LateAfter or more after their slot, and says
// so through Warn at most once a warnEvery.
type lag struct {
	mu       sync.Mutex
	lastWarn time.Time
	late     int           // since the last warning
	worst    time.Duration // of those
	total    int
}

// note records a trial sent late after its slot; warn is Config.Warn.
func (l *lag) note(late time.Duration, warn func(string)) {
	if late < LateAfter {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.late, l.total = l.late+1, l.total+1
	l.worst = max(l.worst, late)
	now := time.Now()
	if !l.lastWarn.IsZero() && now.Sub(l.lastWarn) < warnEvery {
		return
	}
	warn(fmt.Sprintf("probe: p2pfault is behind: %d trial(s) sent up to %s late against their slots (%d in all): "+
		"the latencies now measure p2pfault's own lag too", l.late, l.worst.Round(time.Millisecond), l.total))
	l.lastWarn, l.late, l.worst = now, 0, 0
}

// lateOf is a trial's Sample.Late: how late it was sent, when LateAfter
// or more (0, absent, else: a few milliseconds of scheduling is no news).
func lateOf(late time.Duration) time.Duration {
	if late < LateAfter {
		return 0
	}
	return late
}

// Late is how many trials were sent LateAfter or more after their slot.
func (p *Prober) Late() int {
	p.lag.mu.Lock()
	defer p.lag.mu.Unlock()
	return p.lag.total
}

// hold waits Config.Hold(i, k), the lag a test injects, or until ctx is
// done, and returns it.
func (p *Prober) hold(ctx context.Context, i int, k int64) time.Duration {
	if p.cfg.Hold == nil {
		return 0
	}
	d := p.cfg.Hold(i, k)
	if d <= 0 {
		return 0
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return d
}
