package ui

import (
	"fmt"
	"strings"
	"time"

	"p2pfault/event"

	"p2pfault/probe"
)

// sourcePanel is one source: badge, latency chart, rolling stats, hit-rate
// sparkline and counts.
type sourcePanel struct {
	index     int
	selected  bool
	badge     badgeKind
	badgeText string
	chart     latencyChart
	window    time.Duration
	recent    time.Duration
	stats     latencyStats
	ranks     []latencyStats // by data-parallel rank, a source of several only
	decoders  []latencyStats // by decoder, a run of several only
	rankFault string         // the rank a fault in force acts on alone ("rank1"; "" none): its line carries the badge
	ttft      ttftStats      // ttft.go
	inflight  inflightLine   // inflight.go
	why       whyLine        // why.go
	spark     []float64
	n, ok200  int64
	errs      int64
	pulled    int64
	wrong     int64 // pulls that returned other text than the source's
	styles    *Styles
}

func (p sourcePanel) Render(w, h int) string {
	s := p.styles
	inner := w - 1 // one column between panels
	if inner < 10 || h < 1 {
		return blankBlock(w, h)
	}
	name := event.SourceName(p.index)
	if p.selected {
		name = s.Selected.Render("▶ " + name)
	} else {
		name = s.Title.Render("  " + name)
	}
	badge := p.badgeText
	if p.rankFault != "" {
		// One rank's fault: the rest of the engine runs on, so the
		// badge says whose it is (and the rank's line carries it too).
		badge = p.rankFault + " " + badge
	}
	left := name + "  " + s.badge(p.badge).Render(badge)
	right := "latency, last " + fmtSpan(p.window)
	if textWidth(left)+len(right)+1 > inner {
		right = "last " + fmtSpan(p.window)
	}
	title := spread(left, s.Dim.Render(right), inner)

	st := p.stats
	var stats string
	if st.n == 0 {
		stats = s.Dim.Render("no pulls in the last " + fmtSpan(p.recent))
	} else {
		stats = fmt.Sprintf("%s %s  %s %s  %s %s",
			s.Label.Render("p50"), fmtLatency(st.p50),
			s.Label.Render("p95"), fmtLatency(st.p95),
			s.Label.Render("max"), fmtLatency(st.max))
		if suffix := "  " + s.Dim.Render("last "+fmtSpan(p.recent)); textWidth(stats+suffix) <= inner {
			stats += suffix
		}
	}
	hitLabel := s.Label.Render("hits") + " "
	var rate string
	if st.n == 0 {
		rate = "  - "
	} else {
		rate = fmt.Sprintf("%4s", fmtPercent(float64(st.hits)/float64(st.n)))
	}
	hits := hitLabel + rate + " " + hitSparkline(p.spark, s)
	if p.wrong > 0 {
		// Beside the hits: a hit that answered the wrong text. Only once
		// there is one, so a run of right answers reads as before.
		hits += "  " + s.Fail.Render(fmt.Sprintf("wrong %d", p.wrong))
	}
	counts := fmt.Sprintf("%s %d  %s %d  %s %d  %s %d",
		s.Label.Render("n"), p.n, s.Label.Render("200s"), p.ok200,
		s.Label.Render("errors"), p.errs, s.Label.Render("pulled"), p.pulled)

	// The chart takes what the four text lines leave; below four rows it
	// cannot show an axis and a line, so it goes first.
	ttft := append(append(append(p.inflight.lines(s, inner), p.why.lines(s)...), p.ttft.lines(s)...), p.rankLines(inner)...)
	ttft = append(ttft, p.decoderLines(inner)...)
	lines := []string{title}
	chartH := h - 4 - len(ttft)
	if chartH >= 4 {
		lines = append(lines, strings.Split(p.chart.Render(inner, chartH), "\n")...)
	}
	lines = append(append(append(lines, stats), ttft...), hits, counts)
	if len(lines) > h {
		lines = lines[:h]
	}
	for i := range lines {
		lines[i] = fit(lines[i], inner) // the column between panels stays blank
	}
	return block(lines, w, h)
}

// rankLines break the rolling stats down by data-parallel rank, as many
// ranks to a line as fit in w: "rank0 p50 49ms hits 100%  rank1 ...".
func (p sourcePanel) rankLines(w int) []string {
	return p.breakdown(w, "rank", p.ranks, p.rankFault)
}

// decoderLines break them down by decoder, the same way: "dec0 p50 49ms
// max 51ms hits 100%  dec1 ...": a stalled decoder's pulls from this
// source stand out beside the others'.
func (p sourcePanel) decoderLines(w int) []string {
	return p.breakdown(w, "dec", p.decoders, "")
}

// breakdown is the lines of stats by part (word and index name each part,
// "rank1"), as many parts to a line as fit in w; the part named faulted
// carries the source's badge.
func (p sourcePanel) breakdown(w int, word string, stats []latencyStats, faulted string) []string {
	s := p.styles
	var lines []string
	line := ""
	for r, st := range stats {
		name := fmt.Sprintf("%s%d", word, r)
		cell := s.Label.Render(name) + " "
		if name == faulted {
			cell += s.badge(p.badge).Render(p.badgeText) + " "
		}
		if st.n == 0 {
			cell += s.Dim.Render("no pulls")
		} else {
			cell += fmt.Sprintf("p50 %s max %s hits %s", fmtLatency(st.p50), fmtLatency(st.max), fmtPercent(float64(st.hits)/float64(st.n)))
		}
		switch {
		case line == "":
			line = cell
		case textWidth(line+"  "+cell) <= w:
			line += "  " + cell
		default:
			lines, line = append(lines, line), cell
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// panelMin and panelMax bound a source panel's height: below panelMin its
// chart has no room; above panelMax it only stretches.
const panelMin, panelMax = 9, 22

// sourcePanel gathers what source i's panel shows. Its work is bounded by
// the ring, which holds only the windows shown.
func (m Model) sourcePanel(i int, nowT time.Duration) sourcePanel {
	return m.sourcePanelWith(i, nowT, m.st.pending(nowT)[i])
}

// sourcePanelWith is sourcePanel with source i's pulls in flight given.
func (m Model) sourcePanelWith(i int, nowT time.Duration, pend probe.Pending) sourcePanel {
	src := m.st.sources[i]
	recent, window := m.recent(), m.window()
	from := nowT - recent

	st, spark := rollingStats(&src.points, from, nowT)
	kind, text := m.st.badge(i, nowT)
	return sourcePanel{
		index: i, selected: i == m.selected, badge: kind, badgeText: text,
		inflight: m.st.inflightLineOf(i, pend, nowT),
		why:      whyOf(src, m.st.recoveryWindow()),
		chart: latencyChart{points: &src.points, spans: &src.spans, inflight: pend.Starts, from: nowT - window, to: nowT,
			maxGap: m.bridge(), styles: m.styles, scratch: m.scratch.source(i)},
		window: window, recent: recent, stats: st, spark: spark, ttft: ttftOf(&src.points, from, nowT),
		ranks: rankStats(&src.points, from, nowT, m.ranksOf(i)), rankFault: m.st.faultedRank(i),
		decoders: decoderStats(&src.points, from, nowT, m.decoders()), styles: m.styles,
		n: src.n, ok200: src.ok200, errs: src.errs, pulled: src.pulled, wrong: src.wrong,
	}
}

// renderSources tiles the source panels cols wide and rows high, from
// source first on (a page of them: scale.go).
func (m Model) renderSources(w, h, cols, rows, first int, nowT time.Duration) string {
	if len(m.st.sources) == 0 {
		return block([]string{m.styles.Dim.Render("waiting for the run's sources…")}, w, h)
	}
	rowH := h / rows
	pend := m.st.pending(nowT) // once a frame, for every panel
	var rowStrs []string
	for r := 0; r < rows; r++ {
		var cells []string
		used := 0
		for c := 0; c < cols; c++ {
			i := first + r*cols + c
			if i >= len(m.st.sources) {
				break
			}
			pw := w / cols
			if c == cols-1 {
				pw = w - used
			}
			used += pw
			cells = append(cells, m.sourcePanelWith(i, nowT, pend[i]).Render(pw, rowH))
		}
		rowStrs = append(rowStrs, joinBlocks(cells, rowH, w-used))
	}
	// Every row is w wide now: joined, not measured and padded again.
	out := strings.Join(rowStrs, "\n")
	if extra := h - rowH*rows; extra > 0 {
		out += "\n" + blankBlock(w, extra)
	}
	return out
}
