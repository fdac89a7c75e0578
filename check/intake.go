package check

import (
	"slices"
	"time"

	"p2pfault/event"
)

// Judge judges a run as it goes, every fault window on its own, from
// running figures: it keeps O(1) per source and per window, not per pull
// (latencies, see pullSet), so a run of hours keeps what a run of a minute
// does. The experiment feeds it the run's facts as they come (Open, Close,
// Started, Ended, Verified; Advance now and then) and asks it for the
// verdict; `p2pfault report` feeds it a finished run's events (JudgeRun).
// For a run of one window it gives exactly the verdict of the tests'
// oracle (Evaluate and WithFaultChecks in oracle_test.go), which selects
// every window's pulls from the whole run anew.
//
// Its parts, one file each: this file takes in the facts; assign.go says
// which window judges a pull and places it in that window's figures;
// verdict.go turns the figures into verdicts; summary.go sums windows up
// (several windows' checks, the per-kind summary); run.go judges a
// finished run at once.
//
// Which pulls a window judges: a pull is judged by when it started, so one
// that overlaps two windows is judged in the first. A pull naming a
// source, started in a fault window of that source, is the window's
// faulted pull, and one started in its recovery window (the recovery
// bound's length after it closed, cut short by the next window's start) a
// recovery pull; a pull naming another source started in a window is its
// healthy pull (in the first window in force, when faults overlap). detect_s reads a
// window's faulted pulls; recover_s the pulls naming its source from its
// end to the next window's start (or the run's end). A pull outside every
// window is part of its source's steady state.
//
// Pulls are judged in start order, once every pull started before them
// has ended (detect_s and recover_s are one pass in start order) and
// Lag after their start (by then every window that opened before them is
// known to the judge); until then they wait in a buffer, bounded by the
// rate and the pull timeout, and a verdict counts them as they are.
// Not safe for concurrent use.
type Judge struct {
	b        event.Bounds
	sources  int
	scripted bool
	content  *ContentTally // every pull that ended, for content_matches

	inflight map[int64]event.PullStart
	buf      []event.Sample // ended, not judged yet, in start order
	// recent is each source's latest pulls that ended (baseline.go): a
	// window opened on it starts its baseline from them.
	recent map[int]baseline

	// run is every pull judged: the run's all_200 and, over every window,
	// its faulted, healthy and recovery pulls (a run of several windows
	// summarises them).
	run    figs
	steady map[int]*Figures
	// ranks is each source's data-parallel ranks (Setup.Ranks); byRank
	// the breakdown of those with several (ranks.go).
	ranks    []int
	decoders int
	byRank   map[rankKey]*Figures

	wins       []*winJudge // in start order
	verifs     []event.Verification
	newSettled []event.WindowVerdict
	// stop is when the run stopped sending (Stop; 0: not yet): a pull
	// sent at or after it is not judged, as the oracle judges none sent
	// after the run's end.
	stop time.Duration
}

// Lag is how long after its start a pull waits before it is judged: a
// fault window is known to the judge within milliseconds of its start.
const Lag = 500 * time.Millisecond

// Setup is what a run is judged by.
type Setup struct {
	Bounds   event.Bounds // scaled
	Sources  int          // each gets a steady-state line, also one no pull named
	Scripted bool         // the run plays a timeline (Judged)
	Content  ContentRule  // content_matches's rule; off leaves the check out
	// Ranks is each source's data-parallel ranks by index (RunInfo's
	// SourceRanks; nil: one each): the verdict breaks the pulls of a
	// source of several down by rank.
	Ranks []int
	// Decoders is the run's number of decoders (RunInfo's; 0 or 1: one):
	// with several, the verdict breaks every source's pulls down by
	// decoder too.
	Decoders int
}

// NewJudge returns a judge of a run set up as s.
func NewJudge(s Setup) *Judge {
	j := &Judge{b: s.Bounds, sources: s.Sources, scripted: s.Scripted, content: NewContentTally(s.Content),
		inflight: map[int64]event.PullStart{}, steady: map[int]*Figures{}, recent: map[int]baseline{},
		ranks: s.Ranks, decoders: s.Decoders, byRank: map[rankKey]*Figures{}}
	for i := range s.Sources {
		j.steady[i] = NewFigures()
	}
	return j
}

// winJudge is one window's running figures; once settled only its verdict.
type winJudge struct {
	w     event.Window
	index int
	// spanEnd is the start of the first window that opened at or after
	// this one closed: its recovery and recover_s end there (0: none yet).
	spanEnd time.Duration

	f       winFigs
	verifs  []event.Verification
	base    baseline // its source's latest pulls that ended before it opened
	settled *event.WindowVerdict
}

// Open tells the judge a fault window opened (w.End 0).
func (j *Judge) Open(w event.Window) {
	for _, o := range j.wins {
		if o.w.End != 0 && o.spanEnd == 0 && w.Start >= o.w.End {
			o.spanEnd = w.Start
		}
	}
	wj := &winJudge{w: w, index: len(j.wins) + 1, f: winFigs{rec: recoverAcc{rate: j.b.RecoveryHitRate}},
		base: j.recent[w.Source].before(w.Start)}
	j.wins = append(j.wins, wj)
}

// Close tells the judge the open window on w.Source that started at
// w.Start closed at w.End.
func (j *Judge) Close(w event.Window) {
	for _, o := range j.wins {
		if o.w.Source == w.Source && o.w.Start == w.Start && o.w.End == 0 {
			o.w = w
			return
		}
	}
	// A close without its open (a stream cut at its start): both at once.
	j.Open(w)
}

// Stop tells the judge the run's judged time ended at runEnd: pulls sent
// from then on (while the probe stops) are not judged.
func (j *Judge) Stop(runEnd time.Duration) {
	j.stop = runEnd
	for t, p := range j.inflight {
		if p.Start >= runEnd {
			delete(j.inflight, t)
		}
	}
	j.buf = slices.DeleteFunc(j.buf, func(s event.Sample) bool { return s.Start >= runEnd })
}

func (j *Judge) stopped(start time.Duration) bool { return j.stop > 0 && start >= j.stop }

// Started tells the judge a pull was sent.
func (j *Judge) Started(p event.PullStart) {
	if !j.stopped(p.Start) {
		j.inflight[p.Trial] = p
	}
}

// Ended tells the judge a pull ended (or was cut short: Aborted).
// content_matches reads every pull that ended, also one sent after the
// run stopped: a wrong text is wrong whenever it was asked for.
func (j *Judge) Ended(s event.Sample) {
	delete(j.inflight, s.Trial)
	j.content.Add(s)
	j.noteBaseline(s)
	if j.stopped(s.Start) {
		return
	}
	i, _ := slices.BinarySearchFunc(j.buf, s, cmpStart)
	j.buf = slices.Insert(j.buf, i, s)
}

// Verified tells the judge what a fault action's verification saw: it
// belongs to the window on its source nearest to the action (one that
// spans it; else the nearest by start or end): an action's window opens
// when the action has taken hold, which under load can be seconds after
// the action began (v.At), and an undo (heal, resume) acts at its
// window's end.
func (j *Judge) Verified(v event.Verification) {
	j.verifs = append(j.verifs, v)
	var best *winJudge
	var bestD time.Duration
	for _, o := range j.wins {
		if o.w.Source != v.Source {
			continue
		}
		var d time.Duration
		switch {
		case v.At < o.w.Start:
			d = o.w.Start - v.At
		case o.w.End != 0 && v.At > o.w.End:
			d = v.At - o.w.End
		}
		if best == nil || d <= bestD {
			best, bestD = o, d
		}
	}
	if best != nil {
		best.verifs = append(best.verifs, v)
	}
}

// Advance judges the pulls that ended, started before now-Lag and before
// every pull still in flight, and settles the windows nothing to come can
// change any more (Settled returns them).
func (j *Judge) Advance(now time.Duration) {
	var oldest *event.PullStart
	for _, p := range j.inflight {
		if oldest == nil || p.Start < oldest.Start || p.Start == oldest.Start && p.Trial < oldest.Trial {
			oldest = &p
		}
	}
	n := 0
	live := liveTally{j}
	for _, s := range j.buf {
		if s.Start >= now-Lag || oldest != nil && cmpStart(s, event.Sample{Start: oldest.Start, Trial: oldest.Trial}) > 0 {
			break
		}
		j.place(s, live)
		n++
	}
	j.buf = slices.Delete(j.buf, 0, n)
	j.settle(now, oldest)
}

// settle turns every window whose span has ended, with no pull of it
// still to come, into its verdict and drops its figures.
func (j *Judge) settle(now time.Duration, oldest *event.PullStart) {
	for _, wj := range j.wins {
		if wj.settled != nil || wj.w.End == 0 || wj.spanEnd == 0 {
			continue
		}
		if oldest != nil && oldest.Start < wj.spanEnd || len(j.buf) > 0 && j.buf[0].Start < wj.spanEnd {
			continue
		}
		v := j.windowVerdict(wj, &wj.f, now, max(now, wj.spanEnd))
		v.Settled = true
		*wj = winJudge{w: wj.w, index: wj.index, spanEnd: wj.spanEnd, settled: &v}
		j.newSettled = append(j.newSettled, v)
	}
}

// Settled returns the windows settled since the last call.
func (j *Judge) Settled() []event.WindowVerdict {
	out := j.newSettled
	j.newSettled = nil
	return out
}

// Pending are the pulls in flight now.
func (j *Judge) Pending() []event.PullStart {
	out := make([]event.PullStart, 0, len(j.inflight))
	for _, p := range j.inflight {
		out = append(out, p)
	}
	return out
}

// Crossed reports whether a pull in flight broke a time bound of a window
// not yet settled in (from, to] (the package's Crossed).
func (j *Judge) Crossed(from, to time.Duration) bool {
	if len(j.inflight) == 0 {
		return false
	}
	pending := j.Pending()
	for _, wj := range j.wins {
		if wj.settled == nil && Crossed(pending, wj.w, j.b, from, to) {
			return true
		}
	}
	return false
}
