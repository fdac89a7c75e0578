package ui

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/canvas/graph"
	"github.com/NimbleMarkets/ntcharts/canvas/runes"
	"github.com/charmbracelet/lipgloss"
)

// markRune marks a fault window on a chart's time axis.
const markRune = '━'

// inflightRune marks a pull still in flight at its start time and its
// current age, apart from the line of finished pulls.
const inflightRune = '◆'

// wrongRune marks a pull that returned other text than its source's
// completion, at its start time and latency, over the line.
const wrongRune = '✗'

// latencyChart draws one source's pull latencies over a window of run time
// as an ntcharts line chart, each pull at the time it was sent (as the SVG
// timeline does, and Jepsen's latency-raw: a stall is a band of long pulls
// across the fault window, not a spike at its end): the slowest pull per
// braille column, so a single 30 s pull is never averaged away; pulls still
// in flight drawn live at their age, and fault windows marked on the time
// axis.
type latencyChart struct {
	points   *ring[point]
	spans    *ring[span]
	inflight []time.Duration // start times of the pulls still in flight
	from, to time.Duration   // run time shown, since t0
	// maxGap is the longest time without a finished pull that the line
	// still bridges; a longer silence (a hung source) stays a gap.
	maxGap  time.Duration
	styles  *Styles
	scratch *chartScratch // canvases reused between frames; may be nil
}

// chartScratch keeps a source's chart grid between frames, so a frame
// allocates no cells; it is resized only when the panel's size changes.
// It holds pixels, not dashboard state.
type chartScratch struct {
	grid runeGrid
}

// runeGrid is a w×h grid of runes, what the charts draw on: a cell holds
// only its rune, and its style follows from it (classOf), so clearing and
// reading it is a copy of runes. (ntcharts' canvas keeps a lipgloss.Style
// of 560 bytes in every cell; copying those ten times a second for every
// panel was most of a frame.)
type runeGrid struct {
	w, h  int
	cells []rune
}

// reset makes g a cleared w×h grid, reusing its cells.
func (g *runeGrid) reset(w, h int) {
	g.w, g.h = w, h
	if cap(g.cells) < w*h {
		g.cells = make([]rune, w*h)
		return
	}
	g.cells = g.cells[:w*h]
	clear(g.cells)
}

func (g *runeGrid) set(x, y int, r rune) {
	if x >= 0 && x < g.w && y >= 0 && y < g.h {
		g.cells[y*g.w+x] = r
	}
}

// setString writes s from (x, y) on, cut at the grid's edges.
func (g *runeGrid) setString(x, y int, s string) {
	for _, r := range s {
		g.set(x, y, r)
		x++
	}
}

// The chart's frame, laid out as ntcharts' linechart lays out a chart with
// an X and a Y step of 1: the X axis on the next-to-last row, the time
// labels under it, the Y labels right-aligned left of the Y axis.
type chartFrame struct {
	origin struct{ x, y int }
	gw, gh int
}

// frame draws the axes and the Y labels of a w×h chart whose latency axis
// tops at ymax on g, and returns where the graph is.
func (g *runeGrid) frame(w, h int, yFmt func(i int) string) chartFrame {
	var f chartFrame
	f.gh = h - 2
	f.origin.y = h - 2
	valueLen := 0
	for i := 0; i <= f.gh; i++ {
		valueLen = max(valueLen, len(yFmt(i)))
	}
	f.origin.x = valueLen
	f.gw = w - (valueLen + 1)

	g.set(f.origin.x, f.origin.y, '└')
	for y := f.origin.y - 1; y >= 0; y-- {
		g.set(f.origin.x, y, '│')
	}
	for x := f.origin.x + 1; x < w; x++ {
		g.set(x, f.origin.y, '─')
	}
	last := ""
	for i := 0; i <= f.gh; i++ {
		if s := yFmt(i); s != last {
			g.setString(f.origin.x-len(s), f.origin.y-i, s)
			last = s
		}
	}
	return f
}

// Render draws the chart in w columns and h rows: the frame, the line of
// finished pulls, then the marks over it.
func (c latencyChart) Render(w, h int) string {
	if w < 16 || h < 4 || c.to <= c.from {
		return blankBlock(w, h)
	}
	ymax := c.ymax()
	var own chartScratch
	sc := c.scratch
	if sc == nil {
		sc = &own
	}
	g := &sc.grid
	g.reset(w, h)
	f := g.frame(w, h, yLabels(ymax, h-2))
	if f.gw < 4 || f.gh < 1 {
		return blankBlock(w, h)
	}
	origin := canvas.Point{X: f.origin.x, Y: f.origin.y}
	c.drawLine(g, origin, f.gw, f.gh, ymax)
	c.drawSpans(g, origin, f.gw)
	c.drawMarks(g, origin, f.gw, f.gh, ymax)
	c.drawTimeLabels(g, origin, f.gw, (c.to - c.from).Seconds())
	return renderGrid(g, c.styles)
}

// ymax is the top of the latency axis: the slowest pull sent in the
// window, finished or still in flight, rounded up.
func (c latencyChart) ymax() float64 {
	var maxLat time.Duration
	for i := 0; i < c.points.Len(); i++ {
		p := c.points.At(i)
		if s := p.start(); s >= c.from && s <= c.to && p.latency > maxLat {
			maxLat = p.latency
		}
	}
	for _, s := range c.inflight {
		if s >= c.from && s <= c.to {
			maxLat = max(maxLat, c.to-s)
		}
	}
	return niceCeil(math.Max(maxLat.Seconds(), 0.1))
}

// drawLine plots the slowest pull per braille column of the gw×gh graph,
// joining columns no further apart than maxGap.
func (c latencyChart) drawLine(g *runeGrid, origin canvas.Point, gw, gh int, ymax float64) {
	window := (c.to - c.from).Seconds()
	// The slowest pull per braille column; -1 marks a column without one.
	cols := 2 * gw
	colMax := make([]float64, cols)
	for i := range colMax {
		colMax[i] = -1
	}
	for i := 0; i < c.points.Len(); i++ {
		p := c.points.At(i)
		s := p.start()
		if s < c.from || s > c.to {
			continue
		}
		x := int(math.Round((s - c.from).Seconds() / window * float64(cols-1)))
		if v := p.latency.Seconds(); v > colMax[x] {
			colMax[x] = v
		}
	}
	grid := graph.NewBrailleGrid(gw, gh, 0, float64(cols-1), 0, ymax)
	colDur := float64(c.to-c.from) / float64(cols-1)
	bridge := max(1, int(float64(c.maxGap)/colDur))
	var prev canvas.Point
	prevX := -1
	for x, v := range colMax {
		if v < 0 {
			continue
		}
		gp := grid.GridPoint(canvas.Float64Point{X: float64(x), Y: v})
		if prevX >= 0 && x-prevX <= bridge {
			for _, lp := range graph.GetLinePoints(prev, gp) {
				grid.Set(lp)
			}
		} else {
			grid.Set(gp)
		}
		prev, prevX = gp, x
	}
	for y, row := range grid.BraillePatterns() {
		for x, r := range row {
			if r != runes.BrailleBlockOffset { // the graph's cells are still empty
				g.set(origin.X+1+x, y, r)
			}
		}
	}
}

// drawSpans marks the fault windows: a heavy stretch of the time axis.
func (c latencyChart) drawSpans(g *runeGrid, origin canvas.Point, gw int) {
	for i := 0; i < c.spans.Len(); i++ {
		sp := c.spans.At(i)
		end := sp.end
		if sp.open {
			end = c.to
		}
		if end < c.from || sp.start > c.to {
			continue
		}
		x0 := origin.X + 1 + c.column(max(sp.start, c.from), gw)
		x1 := origin.X + 1 + c.column(min(end, c.to), gw)
		for x := x0; x <= x1; x++ {
			g.set(x, origin.Y, markRune)
		}
	}
}

// drawMarks marks, over the line, the wrong answers at their start as
// high as their latency, then the pulls in flight at their start as high
// as their age now.
func (c latencyChart) drawMarks(g *runeGrid, origin canvas.Point, gw, gh int, ymax float64) {
	for i := 0; i < c.points.Len(); i++ {
		p := c.points.At(i)
		if s := p.start(); p.wrong && s >= c.from && s <= c.to {
			g.set(origin.X+1+c.column(s, gw), c.row(p.latency, ymax, origin, gh), wrongRune)
		}
	}
	for _, s := range c.inflight {
		if s < c.from || s > c.to {
			continue
		}
		g.set(origin.X+1+c.column(s, gw), c.row(c.to-s, ymax, origin, gh), inflightRune)
	}
}

// row maps a latency to the graph row that shows it, inside the graph.
func (c latencyChart) row(lat time.Duration, ymax float64, origin canvas.Point, gh int) int {
	row := origin.Y - 1 - int(math.Round(lat.Seconds()/ymax*float64(gh-1)))
	return min(max(row, origin.Y-gh), origin.Y-1)
}

// column maps a run time inside the window to a graph column.
func (c latencyChart) column(t time.Duration, gw int) int {
	f := float64(t-c.from) / float64(c.to-c.from)
	return int(math.Round(f * float64(gw-1)))
}

// drawTimeLabels writes round times before now under the axis ("-30s ... now").
func (c latencyChart) drawTimeLabels(g *runeGrid, origin canvas.Point, gw int, window float64) {
	y := origin.Y + 1
	step := niceCeil(window / math.Max(1, float64(gw)/10))
	right := g.w // labels end before this column
	for k := 0; ; k++ {
		t := -float64(k) * step
		if -t > window+1e-9 {
			break
		}
		label := "now"
		if k > 0 {
			label = fmtTick(t, step)
		}
		x := origin.X + 1 + int(math.Round((t+window)/window*float64(gw-1)))
		start := x - len(label)/2
		if k == 0 {
			start = x - len(label) + 1
		}
		if start < 0 {
			start = 0
		}
		if start+len(label) >= right {
			if k > 0 {
				continue
			}
			start = right - len(label)
		}
		g.setString(start, y, label)
		right = start - 1
	}
}

// fmtTick prints a time before now on the chart's axis.
func fmtTick(t, step float64) string {
	prec := 0
	if step < 1 {
		prec = 1
	}
	if step < 0.1 {
		prec = 2
	}
	return strconv.FormatFloat(t, 'f', prec, 64) + "s"
}

// yLabels labels the latency axis at 0, the middle and the top only, so
// the labels are round numbers.
func yLabels(ymax float64, gh int) func(i int) string {
	return func(i int) string {
		switch {
		case i == 0:
			return "0"
		case i == gh:
			return fmtAxis(ymax)
		case gh >= 6 && i == gh/2 && gh%2 == 0:
			return fmtAxis(ymax / 2)
		}
		return ""
	}
}

func fmtAxis(v float64) string {
	switch {
	case v < 1:
		return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".") + "s"
	case v < 10:
		return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + "s"
	default:
		return strconv.FormatFloat(v, 'f', 0, 64) + "s"
	}
}

// niceCeil rounds v up to 1, 2, 3 or 5 times a power of ten (3 so the
// seed's 30 s handshake timeout fills the chart).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 3, 5, 10} {
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// hitSparkline draws hit rates (0..1) one column a bucket, each a lower
// block as high as its rate in eighths (ntcharts' one-row sparkline
// columns, runes.LowerBlockElementFromFloat64), a full block at 1.
func hitSparkline(rates []float64, styles *Styles) string {
	if len(rates) == 0 {
		return ""
	}
	var g runeGrid
	g.reset(len(rates), 1)
	for x, v := range rates {
		if v > 0 {
			g.set(x, 0, runes.LowerBlockElementFromFloat64(v))
		}
	}
	return renderGrid(&g, styles)
}

// cellClass groups canvas cells that share a style, so a row is styled in
// a few runs rather than one lipgloss call per cell.
type cellClass int

const (
	classPlain cellClass = iota
	classAxis
	classLine
	classMark
	classSpark
	classInflight
	classWrong
	numClasses
)

func classOf(r rune) cellClass {
	switch {
	case r == 0 || r == ' ':
		return classPlain
	case r == markRune:
		return classMark
	case r == inflightRune:
		return classInflight
	case r == wrongRune:
		return classWrong
	case runes.IsBraillePattern(r):
		return classLine
	case runes.IsLowerBlockElement(r):
		return classSpark
	default:
		return classAxis
	}
}

func (s *Styles) class(c cellClass) *lipgloss.Style {
	switch c {
	case classAxis:
		return &s.ChartAxis
	case classLine:
		return &s.ChartLine
	case classMark:
		return &s.ChartMark
	case classSpark:
		return &s.Spark
	case classInflight:
		return &s.ChartInflight
	case classWrong:
		return &s.ChartWrong
	default:
		return nil
	}
}

// runStyle is a style's output around a run of text, worked out once (by
// rendering a NUL and splitting there): the charts' styles are plain
// colours, which lipgloss renders as the same escapes before and after any
// text without a newline, and rendering every run of cells anew was a
// third of a frame.
type runStyle struct {
	prefix, suffix string
	ok             bool
}

func newRunStyle(st lipgloss.Style) runStyle {
	out := st.Render("\x00")
	if strings.Count(out, "\x00") != 1 {
		return runStyle{}
	}
	i := strings.IndexByte(out, 0)
	return runStyle{prefix: out[:i], suffix: out[i+1:], ok: true}
}

// writeRun writes a run of cells of one class, an empty cell as a space.
func (s *Styles) writeRun(out *strings.Builder, cl cellClass, cells []rune) {
	st := s.class(cl)
	rs := s.runs[cl]
	switch {
	case st == nil:
	case rs.ok:
		out.WriteString(rs.prefix)
	default:
		out.WriteString(st.Render(runesText(cells)))
		return
	}
	for _, r := range cells {
		if r == 0 {
			r = ' '
		}
		out.WriteRune(r)
	}
	if st != nil {
		out.WriteString(rs.suffix)
	}
}

func runesText(cells []rune) string {
	var b strings.Builder
	for _, r := range cells {
		if r == 0 {
			r = ' '
		}
		b.WriteRune(r)
	}
	return b.String()
}

// renderGrid turns a grid into text, styling runs of cells by what they
// show.
func renderGrid(g *runeGrid, styles *Styles) string {
	var out strings.Builder
	out.Grow(g.w*g.h*3 + 64*g.h)
	for y := 0; y < g.h; y++ {
		if y > 0 {
			out.WriteByte('\n')
		}
		row := g.cells[y*g.w : (y+1)*g.w]
		for x := 0; x < len(row); {
			cl := classOf(row[x])
			end := x + 1
			for end < len(row) && classOf(row[end]) == cl {
				end++
			}
			styles.writeRun(&out, cl, row[x:end])
			x = end
		}
	}
	return out.String()
}

// renderScratch is each source panel's chartScratch, by source index.
type renderScratch struct {
	sources []*chartScratch
	perArm  map[string]*renderScratch // every arm's but the first (armsview.go)
}

func (r *renderScratch) source(i int) *chartScratch {
	for len(r.sources) <= i {
		r.sources = append(r.sources, &chartScratch{})
	}
	return r.sources[i]
}
