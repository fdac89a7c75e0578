package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"p2pfault/cause"
	"p2pfault/event"
)

// The wire trace as evidence (a run with --link): the links' messages
// (wire events) name each pull's cause anew with no engine line
// (cause.FromWire), beside the run's own causes, and draw the ladder of
// the slowest pulls (ladder.go).

// WireAgreement is how the causes from the wire agree with the run's own
// (the engines' lines first) pull by pull (report.json rows[].wire_agreement).
type WireAgreement struct {
	Pulls int `json:"pulls"`
	Agree int `json:"agree"`
	// Slow are the pulls the run's causes name by a mechanism (neither
	// p2p nor local), SlowAgree those the wire names alike.
	Slow      int `json:"slow"`
	SlowAgree int `json:"slow_agree"`
	// ByWire are the pulls no engine line explained, named from the wire
	// in the run itself (Sample.ByWire): not compared.
	ByWire int `json:"by_wire"`
	// Disagree lists "LINES→WIRE: N", most first.
	Disagree []string `json:"disagree,omitempty"`
}

// wireFacts computes r's causes from the wire, when its stream has wire
// events: the why table they give and their agreement with the run's.
func wireFacts(r Run, events []event.Event) (why []WhyRow, agree *WireAgreement) {
	wire := cause.FromWire(events)
	if wire == nil {
		return nil, nil
	}
	g := cause.Agree(r.Samples, wire)
	agree = &WireAgreement{Pulls: g.Pulls, Agree: g.Agree, Slow: g.Slow, SlowAgree: g.SlowAgree, ByWire: g.ByWire}
	type kv struct {
		k string
		n int
	}
	var dis []kv
	for k, n := range g.Disagree {
		dis = append(dis, kv{string(k[0]) + "→" + string(k[1]), n})
	}
	slices.SortFunc(dis, func(a, b kv) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.k, b.k)
	})
	for _, d := range dis {
		agree.Disagree = append(agree.Disagree, fmt.Sprintf("%s: %d", d.k, d.n))
	}
	rw := r
	rw.Samples = wire
	return whyRows(rw), agree
}

// Words is the agreement as the faces print it.
func (a WireAgreement) Words() string {
	out := fmt.Sprintf("causes from the wire agree with the lines' on %d of %d pulls (%s), on %d of %d slow pulls (%s)",
		a.Agree, a.Pulls, percent(a.Agree, a.Pulls), a.SlowAgree, a.Slow, percent(a.SlowAgree, a.Slow))
	if a.ByWire > 0 {
		out += fmt.Sprintf("; %d more no line explained, named from the wire", a.ByWire)
	}
	if len(a.Disagree) > 0 {
		out += "; lines'→wire's: " + strings.Join(a.Disagree, ", ")
	}
	return out
}

func percent(n, of int) string {
	if of == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

// WireWhyTable is, for the rows whose run had a link, the why table from
// the wire alone and each row's agreement line; "" when none had one.
func WireWhyTable(rows []Row) string {
	var ws []Row
	var lines []string
	for _, r := range rows {
		if r.WireAgreement == nil {
			continue
		}
		c := r
		c.Why = r.WireWhy
		ws = append(ws, c)
		lines = append(lines, runTitle(r.Arm, r.Mode, r.Case, "/")+": "+r.WireAgreement.Words())
	}
	if len(ws) == 0 {
		return ""
	}
	t := whyTable(ws)
	t.caption = "Why, from the wire: " + wireWhyCaption + "."
	return "why, from the wire alone (the links' messages, no engine line):\n" + t.plain() + strings.Join(lines, "\n") + "\n"
}

const wireWhyCaption = "the same pulls named from the links' messages alone, with no engine line (a connect with no connect_ack: the handshake; a lookup with no lookup_resp: the lookup deadline; a fetch with no transfer_done: the load timeout), and how they agree with the run's causes pull by pull; the wire names no timer"

// seconds3 is d in seconds with milliseconds, for the ladder's time column.
func seconds3(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }
