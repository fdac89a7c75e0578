package report

import (
	"os"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"p2pfault/event"
)

// ladderEvents is a virtual run's events (slice --engine virtual --cases
// ack-withheld --link --arms main, source-0's pulls and messages from
// 9.5 s to 42 s): connect_ack withheld from 10 s until unlink at 40 s.
const ladderEvents = "testdata/ladder-ack-withheld.events.jsonl.zst"

// TestLadderText: the two slowest pulls of the window, each with the
// messages of its pair while it waited — the connect, its connect_ack
// withheld, the decoder's disconnect at the handshake deadline 30 s later —
// as a text sequence diagram.
func TestLadderText(t *testing.T) {
	text, err := LadderOf(ladderEvents, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"slowest pull 1", "slowest pull 2", "connect_ack", "withheld by the link", "disconnect", "handshake deadline"} {
		if !strings.Contains(text, want) {
			t.Errorf("the ladder does not show %q:\n%s", want, text)
		}
	}
	golden.RequireEqual(t, text)
}

// TestLadderSVG: report.html's ladder of the window's slowest pull has a
// lifeline each for the decoder and the source, an arrow per message, the
// withheld connect_ack cut short (no arrowhead, a ✕), the pull's start and
// end, and the wait before the deadline written on it; text from the
// events is escaped.
func TestLadderSVG(t *testing.T) {
	f, err := os.Open(ladderEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, _, err := ReadEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := FromStream(evs)
	if err != nil {
		t.Fatal(err)
	}
	ls := htmlLaddersOf("row-0", runs[0])
	if len(ls) != 1 {
		t.Fatalf("%d ladders, want the window's slowest pull's", len(ls))
	}
	svg := string(ls[0].SVG)
	l := runs[0].ladders[0]
	for what, n := range map[string]int{
		`<text class="lane"`: 2, `class="msg `: len(l.Steps), `class="cut"`: 1,
		`class="pull-start"`: 1, `class="pull-end"`: 1, `class="gap"`: 1,
	} {
		if got := strings.Count(svg, what); got != n {
			t.Errorf("%d of %s, want %d", got, what, n)
		}
	}
	if !strings.Contains(svg, "connect_ack (withheld by the link)") || !strings.Contains(svg, "… 29.985 s") {
		t.Errorf("the ladder does not say the connect_ack was withheld and the 30 s wait:\n%s", svg)
	}

	// A kv_request_id or cause label is text, never markup.
	l.Steps = append(l.Steps, Step{T: l.Pull.End(), Dir: event.WireToDecoder, Type: `<script>x</script>`})
	if got := string(ladderSVG(l)); strings.Contains(got, "<script>") {
		t.Errorf("a message type was written as markup: %s", got)
	}
}
