package experiment

import (
	"context"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/netenv"
	"p2pfault/scrape"
)

// firing is the run's bookkeeping for one source, as a fault kind acts on
// it (fault.Env).
type firing struct {
	e      *Experiment
	src    int
	target string // one rank's name when the action is on one ("" the source)
	kind   *fault.Kind
	opts   fault.Options
	// pairSrc is, for a cut on one pair, its source (src is its decoder's
	// key: targetKey); -1 otherwise.
	pairSrc int
	// rank and decoder narrow a link kind to one rank's links and one
	// decoder's (a pair's); -1: every one.
	rank, decoder int
}

var _ fault.Env = (*firing)(nil)

// Context is the run's, read under the run's lock: a kind may act
// (a key) while Run is still setting it.
func (f *firing) Context() context.Context { return f.e.run.context() }

func (f *firing) Record(action string, d time.Duration, by string, err error) {
	f.e.faultEvent(action, f.src, f.target, d, by, err)
}

func (f *firing) OpenWindow(at time.Time, recovers bool) {
	if f.src < 0 { // a decoder or a pair (targetKey): judged by check.DecoderChecks
		f.e.verdicts.openDecoder(-1-f.src, f.pairSrc, f.kind.Name, f.e.run.rel(at), recovers)
		f.e.setPhase(event.PhaseFault)
		return
	}
	f.e.openWindow(f.src, f.target, f.kind.Name, at, recovers)
}
func (f *firing) CloseWindow(at time.Time) { f.e.closeWindow(f.src, at) }

// SetCondition records the fault in force on the source (up: none) and
// sends its condition, read with the engine's state now. A fault that
// ends is forgotten before the state is read, so the next action on the
// source is not refused by it meanwhile.
func (f *firing) SetCondition(c event.Condition) {
	t, err := f.e.source(f.src)
	if err != nil {
		return
	}
	if c == event.CondUp {
		f.e.faults.set(f.src, nil)
		f.e.observe(f.src, t.State())
		return
	}
	eng := t.State()
	fi := inForce{cond: c, kind: f.kind, pid: eng.Pid, target: f.target}
	if f.kind.TakesFor && f.opts.For > 0 {
		fi.until = f.e.run.since() + f.opts.For
	}
	f.e.faults.set(f.src, &fi)
	f.e.observe(f.src, eng)
}

func (f *firing) Hold(h any) {
	fs := f.e.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if h == nil {
		delete(fs.held, f.src)
	} else {
		fs.held[f.src] = h
	}
}

func (f *firing) Held() any {
	fs := f.e.faults
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.held[f.src]
}

func (f *firing) Verified(action string, ef fault.Effect) {
	f.e.verified(f.src, f.target, action, f.e.run.since(), ef)
}

func (f *firing) Go(fn func())   { f.e.faultsGoing.Go(func() { f.e.safely(fn) }) }
func (f *firing) Fail(err error) { f.e.run.failWith(err) }

// Changed tells the faces the source's new state and, when its target
// now has another address (a replace's new engine, ready), makes the
// probe name that one from now on (address.go).
func (f *firing) Changed() {
	f.e.readdress(f.src)
	f.e.emitEngines()
}

var _ fault.LoadEnv = (*firing)(nil)

// LoadTarget is how a kind's own load reaches the fired source: the model
// the run's engines serve, over the cluster's network.
func (f *firing) LoadTarget() (string, netenv.Network) {
	cl := f.e.run.cluster()
	var nw netenv.Network
	if cl != nil {
		nw = networkOf(cl)
	}
	return f.e.plan.Model, nw
}

// SourceMetrics reads the fired source's /metrics once, as the scraper
// does, for a kind's verification (busy: its queues).
func (f *firing) SourceMetrics(ctx context.Context) (event.Reading, error) {
	t, err := f.e.source(f.src)
	if err != nil {
		return event.Reading{}, err
	}
	_, nw := f.LoadTarget()
	return scrape.FetchOnce(ctx, nw, t.HTTPURL(), 0)
}

// Loaded sends a report of the load on the fired source, begun at start
// and ended at end (zero while it runs).
func (f *firing) Loaded(info event.LoadInfo, start, end time.Time) {
	info.Source = f.src
	info.Start = f.e.run.rel(start)
	if !end.IsZero() {
		info.End = max(f.e.run.rel(end), info.Start+1)
	}
	f.e.emit(event.Event{Kind: event.KindLoad, Load: &info})
}

// set records the fault in force on src (nil: none).
func (fs *faults) set(src int, fi *inForce) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fi == nil {
		delete(fs.inForce, src)
	} else {
		fs.inForce[src] = *fi
	}
}
