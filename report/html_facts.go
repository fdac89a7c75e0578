package report

import (
	"fmt"
	"time"

	"p2pfault/event"
)

// maxLogEntries caps the event log report.html keeps per run: engines
// print few lines worth showing, but a damaged or very long run must not
// make a page nobody can open.
const maxLogEntries = 2000

// htmlFacts are the facts of a run that only report.html shows, gathered
// by FromEvents from the same events: the pulls sent (to find the ones that
// never ended), the decoder's live /metrics figures as the dashboard showed
// them, the fault actions, and the run's event log.
type htmlFacts struct {
	started    []event.PullStart
	decoder    []livePoint
	faults     []faultMark
	log        []logEntry
	logDropped int
	lastT      time.Duration     // T of the run's last event: where a pending pull's age is read
	states     map[string]string // each engine's StateText, as last logged
}

// livePoint is one scrape's live figures (event.MetricsInfo.Live).
type livePoint struct {
	T    time.Duration
	Live event.Live
}

// faultMark is one fault action, for a marker on the charts.
type faultMark struct {
	T      time.Duration
	Action string
	Source int
	By     string
	Err    string
}

// logEntry is one line of a row's event log in report.html: kind is the
// event's kind, who the engine or source it is about.
type logEntry struct {
	T    time.Duration
	Kind string
	Who  string
	Text string
}

func (f *htmlFacts) add(ev event.Event) {
	f.lastT = max(f.lastT, ev.T)
	switch ev.Kind {
	case event.KindPullStart:
		f.started = append(f.started, ev.Pulls...)
	case event.KindMetrics:
		if m := ev.Metrics; m != nil && m.Engine == DecoderEngine {
			f.decoder = append(f.decoder, livePoint{T: ev.T, Live: m.Live})
		}
	case event.KindFault:
		if fi := ev.Fault; fi != nil {
			f.faults = append(f.faults, faultMark{T: ev.T, Action: fi.Action, Source: fi.Source, By: fi.By, Err: fi.Err})
			text := fmt.Sprintf("%s %s (%s)", fi.Action, event.SourceName(fi.Source), fi.By)
			if fi.Err != "" {
				text += ": " + fi.Err
			}
			f.logf(ev, event.SourceName(fi.Source), text)
		}
	case event.KindLog:
		if l := ev.Log; l != nil {
			f.logf(ev, l.Engine, l.Line)
		}
	case event.KindEngine:
		// Engine events come once a second; the log keeps the changes.
		if e := ev.Engine; e != nil && f.states[e.Name] != e.StateText() {
			if f.states == nil {
				f.states = map[string]string{}
			}
			text := e.StateText()
			if e.Exit != "" {
				text += " (" + e.Exit + ")"
			}
			f.states[e.Name] = e.StateText()
			f.logf(ev, e.Name, text)
		}
	case event.KindWarning:
		f.logf(ev, "", ev.Message)
	case event.KindPhase:
		f.logf(ev, "", string(ev.Phase))
	case event.KindVerification:
		if v := ev.Verification; v != nil {
			f.logf(ev, v.TargetName(), v.Action+": "+v.Detail)
		}
	case event.KindAddress:
		// A source's first address is the run's own; a new one (a replace)
		// is a line.
		if a := ev.Address; a != nil && a.Prev != "" {
			f.logf(ev, event.SourceName(a.Source), fmt.Sprintf("pulls name %s (%s) from %.2fs on, not %s", a.P2P, a.URL, a.At.Seconds(), a.Prev))
		}
	case event.KindEnd:
		f.logf(ev, "", fmt.Sprintf("%s (exit %d)", ev.Message, ev.ExitCode))
	}
}

func (f *htmlFacts) logf(ev event.Event, who, text string) {
	if len(f.log) >= maxLogEntries {
		f.logDropped++
		return
	}
	f.log = append(f.log, logEntry{T: ev.T, Kind: string(ev.Kind), Who: who, Text: text})
}

// pending is the pulls the events say were sent and never say ended: no
// sample has their trial. In a run that ended cleanly there are none (the
// probe drains or aborts every pull); a crashed run leaves them.
func (r Run) pending() []event.PullStart {
	if len(r.html.started) == 0 {
		return nil
	}
	ended := make(map[int64]bool, len(r.Samples))
	for _, s := range r.Samples {
		ended[s.Trial] = true
	}
	var out []event.PullStart
	for _, p := range r.html.started {
		if !ended[p.Trial] {
			out = append(out, p)
			ended[p.Trial] = true // a trial is pending once
		}
	}
	return out
}
