package report

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// htmlLadder is one ladder as report.html draws it: an inline SVG
// sequence diagram, its text escaped here (template.HTML is not escaped
// again by the page's template).
type htmlLadder struct {
	ID    string
	Title string
	SVG   template.HTML
}

// The SVG ladder's geometry, in pixels.
const (
	svgLadderW    = 760
	svgLadderLeft = 170 // the decoder's lifeline
	svgLadderRite = 610 // the source's lifeline
	svgLadderTop  = 40
	svgStepH      = 22
)

// ladderSVG draws l: the decoder's and the source's lifelines, the pull's
// start and end, each message as an arrow at its time's row (a withheld
// or dropped one stops short of its side with a ✕), and the time between
// consecutive rows where the pull waited.
func ladderSVG(l Ladder) template.HTML {
	esc := template.HTMLEscapeString
	h := svgLadderTop + svgStepH*(len(l.Steps)+2) + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="ladder" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`,
		svgLadderW, h, svgLadderW, h)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker></defs>`)
	for _, lane := range []struct {
		x    int
		name string
	}{{svgLadderLeft, "decoder"}, {svgLadderRite, "source"}} {
		fmt.Fprintf(&b, `<text class="lane" x="%d" y="20" text-anchor="middle" font-weight="bold">%s</text>`, lane.x, lane.name)
		fmt.Fprintf(&b, `<line x1="%d" y1="28" x2="%d" y2="%d" stroke="#999" stroke-dasharray="4 3"/>`, lane.x, lane.x, h-10)
	}
	y := svgLadderTop
	row := func(t time.Duration) {
		fmt.Fprintf(&b, `<text class="t" x="8" y="%d">%s</text>`, y+4, seconds3(t))
	}
	sent := false // the pull's start, in time order among its messages
	prev := l.Pull.Start
	if len(l.Steps) > 0 {
		prev = min(prev, l.Steps[0].T)
	}
	start := func() {
		row(l.Pull.Start)
		prev = max(prev, l.Pull.Start)
		fmt.Fprintf(&b, `<circle class="pull-start" cx="%d" cy="%d" r="5" fill="#2a6"/><text x="%d" y="%d">pull sent</text>`, svgLadderLeft, y, svgLadderLeft-75, y+4)
		sent = true
	}
	for _, st := range l.Steps {
		if !sent && st.T >= l.Pull.Start {
			start()
			y += svgStepH
		}
		row(st.T)
		if gap := st.T - prev; gap >= time.Second {
			fmt.Fprintf(&b, `<text class="gap" x="%d" y="%d" fill="#b33" font-style="italic">… %s</text>`, svgLadderLeft+6, y-svgStepH/2+4, seconds3(gap))
		}
		prev = st.T
		ladderArrow(&b, st, y, esc)
		y += svgStepH
	}
	if !sent {
		start()
		y += svgStepH
	}
	row(l.Pull.End())
	fmt.Fprintf(&b, `<circle class="pull-end" cx="%d" cy="%d" r="5" fill="#c33"/><text x="%d" y="%d">%s</text>`,
		svgLadderLeft, y, svgLadderLeft+10, y+4, esc("pull ends: "+l.outcome()+" after "+seconds3(l.Pull.Latency)+" — "+l.Pull.Cause.Label()))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// ladderArrow draws one message at y.
func ladderArrow(b *strings.Builder, st Step, y int, esc func(string) string) {
	from, to := svgLadderLeft, svgLadderRite
	if st.Dir != "decoder>source" {
		from, to = to, from
	}
	cut := st.Verb == "drop" || st.Verb == "hold"
	end, marker, color := to, ` marker-end="url(#arrow)"`, "#333"
	if cut {
		end, marker, color = from+(to-from)*3/4, "", "#c33"
	}
	fmt.Fprintf(b, `<line class="msg msg-%s" x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"%s/>`, esc(st.Type), from, y, end, y, color, marker)
	if cut {
		fmt.Fprintf(b, `<text class="cut" x="%d" y="%d" text-anchor="middle" fill="#c33" font-weight="bold">✕</text>`, end, y+4)
	}
	label := st.label()
	if st.Verb != "" {
		label += " (" + map[string]string{"hold": "withheld", "drop": "dropped", "delay": "delayed"}[st.Verb] + " by the link)"
	}
	fmt.Fprintf(b, `<text class="label" x="%d" y="%d" text-anchor="middle">%s</text>`, (svgLadderLeft+svgLadderRite)/2, y-4, esc(label))
}

// htmlLadders are run's ladders for report.html.
func htmlLaddersOf(id string, run Run) []htmlLadder {
	var out []htmlLadder
	for i, l := range run.ladders {
		out = append(out, htmlLadder{ID: fmt.Sprintf("%s-ladder-%d", id, i), Title: l.Title(), SVG: ladderSVG(l)})
	}
	return out
}
