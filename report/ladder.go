package report

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"p2pfault/event"
)

// The ladder of the slowest pulls: for the slowest pulls naming each fault
// window's source, the control messages between the decoder and the
// source over the pull's time, as the link saw them (wire events) — a
// sequence diagram, so a reviewer sees in one picture why a pull took
// 30 s (a connect whose connect_ack never came, a lookup never answered).
// `report --ladder N` prints it as text; report.html draws the slowest
// pull of each window (htmlLadders) as SVG (ladder_svg.go).

// htmlLadders is how many of each window's slowest pulls report.html draws.
const htmlLadders = 1

// ladderSteps bounds one ladder's messages: a pull's own are a handful;
// past it (a link that kept resetting) the rest are counted, not drawn.
const ladderSteps = 48

// Ladder is one slow pull and the messages of its pair during it.
type Ladder struct {
	Run    string // "arm/case"
	Window int    // the window's index, from 0
	Kind   string
	Source int
	At     time.Duration // the window's start
	Nth    int           // 1 for the slowest pull of the window
	Pull   event.Sample
	Pair   string // the link's name ("source-0")
	Steps  []Step
	More   int // messages past ladderSteps, not drawn
}

// Step is one message of a ladder.
type Step struct {
	T    time.Duration
	Dir  string // event.WireToSource or event.WireToDecoder
	Type string
	Verb string // "" passed, "drop", "hold", "delay"
	Keys int
	Hits int
}

// Ladders are the n slowest pulls of each window of r (those naming its
// source and in flight during it) with their messages, from the run's
// events; nil when they hold no wire event.
func Ladders(r Run, events []event.Event, n int) []Ladder {
	if n <= 0 || !slices.ContainsFunc(events, func(ev event.Event) bool { return ev.Kind == event.KindWire }) {
		return nil
	}
	var out []Ladder
	for i, w := range r.Windows {
		var pulls []event.Sample
		for _, s := range r.Samples {
			if s.Source == w.Source && s.Peer != "" && s.Start < w.End && s.End() > w.Start {
				pulls = append(pulls, s)
			}
		}
		slices.SortStableFunc(pulls, func(a, b event.Sample) int { return cmp.Compare(b.Latency, a.Latency) })
		for k, s := range pulls[:min(n, len(pulls))] {
			l := Ladder{Run: r.Name(), Window: i, Kind: w.Kind, Source: w.Source, At: w.Start, Nth: k + 1, Pull: s}
			l.Pair, l.Steps, l.More = stepsOf(events, s)
			out = append(out, l)
		}
	}
	return out
}

// stepsOf are the messages of s's pair bearing on it: those naming its
// kv_request_id, the session's (connect, connect_ack, disconnect) during
// it, and a connect still unanswered when it was sent (the handshake it
// waited on) with what followed.
func stepsOf(events []event.Event, s event.Sample) (pair string, steps []Step, more int) {
	from := s.Start
	for _, ev := range events {
		w := ev.Wire
		if ev.Kind != event.KindWire || w.Peer != s.Peer || ev.T >= s.Start {
			continue
		}
		switch {
		case w.Type == "connect" && w.Dir == event.WireToSource:
			if from == s.Start {
				from = ev.T
			}
		case w.Type == "connect_ack" && w.Dir == event.WireToDecoder && !w.Withheld():
			from = s.Start
		}
	}
	for _, ev := range events {
		w := ev.Wire
		if ev.Kind != event.KindWire || w.Peer != s.Peer || ev.T < from || ev.T > s.End() {
			continue
		}
		if id := w.PullID(); id != "" && id != s.KVRequestID {
			continue // another pull's
		}
		pair = w.Pair
		if len(steps) == ladderSteps {
			more++
			continue
		}
		steps = append(steps, Step{T: ev.T, Dir: w.Dir, Type: w.Type, Verb: w.Verb, Keys: w.Keys, Hits: w.Hits})
	}
	return pair, steps, more
}

// outcome is how the pull ended, in words.
func (l Ladder) outcome() string {
	s := l.Pull
	switch {
	case s.Err != "":
		return "failed: " + s.Err
	case s.Hit():
		return "pulled over P2P"
	}
	return "missed"
}

// Title is the ladder's heading.
func (l Ladder) Title() string {
	cause := l.Pull.Cause.Label()
	if l.Pull.Timer != nil {
		cause += " (" + l.Pull.Timer.String() + ")"
	}
	pair := l.Pair
	if pair == "" {
		pair = event.SourceName(l.Source)
	}
	return fmt.Sprintf("%s, window %d (%s %s at %.1f s), slowest pull %d: trial %d on %s, kv_request_id %s, sent at %s, took %s: %s",
		l.Run, l.Window+1, l.Kind, event.SourceName(l.Source), l.At.Seconds(), l.Nth, l.Pull.Trial, pair,
		orDash(l.Pull.KVRequestID), seconds3(l.Pull.Start), seconds3(l.Pull.Latency), cause)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// label is a step's words on its arrow.
func (st Step) label() string {
	out := st.Type
	if st.Keys > 0 {
		out += fmt.Sprintf(" %d blocks", st.Keys)
	}
	if st.Type == "lookup_resp" {
		out += fmt.Sprintf(" %d hits", st.Hits)
	}
	return out
}

// ladderWidth is the text ladder's arrow length, in characters.
const ladderWidth = 40

// LadderText is the ladders as text sequence diagrams, a blank line
// between; "" for none.
func LadderText(ls []Ladder) string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(l.Title() + "\n")
		fmt.Fprintf(&b, "%12s  %-*s  %s\n", "t", ladderWidth+2, "decoder", "source")
		sent := false // the pull's start, in time order among its messages
		for _, st := range l.Steps {
			if !sent && st.T >= l.Pull.Start {
				fmt.Fprintf(&b, "%12s  ● pull sent\n", seconds3(l.Pull.Start))
				sent = true
			}
			fmt.Fprintf(&b, "%12s  %s\n", seconds3(st.T), arrow(st))
		}
		if !sent {
			fmt.Fprintf(&b, "%12s  ● pull sent\n", seconds3(l.Pull.Start))
		}
		if l.More > 0 {
			fmt.Fprintf(&b, "%12s  … %d more messages\n", "", l.More)
		}
		fmt.Fprintf(&b, "%12s  ● pull ends: %s after %s\n", seconds3(l.Pull.End()), l.outcome(), seconds3(l.Pull.Latency))
	}
	return b.String()
}

// arrow is one step as "│── connect ──────▶│", a withheld or dropped
// message cut by ╳ before the far side, with the link's verb after.
func arrow(st Step) string {
	label := " " + st.label() + " "
	pad := max(ladderWidth-2-len([]rune(label)), 2)
	var line string
	if st.Dir == event.WireToSource {
		line = "│──" + label + strings.Repeat("─", pad) + "▶│"
		if st.Verb == "drop" || st.Verb == "hold" {
			line = "│──" + label + strings.Repeat("─", pad-1) + "╳ │"
		}
	} else {
		line = "│◀" + strings.Repeat("─", pad) + label + "──│"
		if st.Verb == "drop" || st.Verb == "hold" {
			line = "│ ╳" + strings.Repeat("─", pad-1) + label + "──│"
		}
	}
	switch st.Verb {
	case "hold":
		line += "  withheld by the link"
	case "drop":
		line += "  dropped by the link"
	case "delay":
		line += "  delayed by the link"
	}
	return line
}

// LadderOf reads the events file at path and gives the ladders of the n
// slowest pulls of each window of each arm it holds, as text; "" when the
// run had no link (no wire event).
func LadderOf(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open events log: %w", err)
	}
	defer f.Close()
	events, _, err := ReadEvents(f)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	var all []Ladder
	for _, evs := range ByArm(events) {
		r, err := FromEvents(evs)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", path, err)
		}
		all = append(all, Ladders(r, evs, n)...)
	}
	return LadderText(all), nil
}
