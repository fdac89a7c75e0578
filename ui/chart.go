package ui

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/canvas/graph"
	"github.com/NimbleMarkets/ntcharts/canvas/runes"
	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/NimbleMarkets/ntcharts/sparkline"
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

// chartScratch keeps a source's chart canvases between frames. An ntcharts
// canvas is w×h cells each holding a lipgloss.Style (~600 bytes), too much
// to allocate ten times a second; it is rebuilt only when the size changes.
// It holds pixels, not dashboard state.
type chartScratch struct {
	w, h  int
	chart *linechart.Model
	spark *sparkline.Model
}

// lineChart returns a cleared w×h line chart with the given ranges.
func (s *chartScratch) lineChart(w, h int, window, ymax float64, yFmt linechart.LabelFormatter) *linechart.Model {
	if s == nil || s.chart == nil || s.w != w || s.h != h {
		lc := linechart.New(w, h, -window, 0, 0, ymax,
			linechart.WithXYSteps(1, 1),
			// Labels are placed by hand: linechart puts one every
			// step columns, which gives unround times.
			linechart.WithXLabelFormatter(func(int, float64) string { return "" }),
			linechart.WithYLabelFormatter(yFmt),
		)
		if s == nil {
			return &lc
		}
		s.w, s.h, s.chart = w, h, &lc
		return s.chart
	}
	lc := s.chart
	var empty canvas.Cell
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			lc.Canvas.SetCell(canvas.Point{X: x, Y: y}, empty)
		}
	}
	lc.YLabelFormatter = yFmt
	lc.SetXYRange(-window, 0, 0, ymax)
	lc.SetViewXYRange(-window, 0, 0, ymax)
	lc.UpdateGraphSizes()
	return lc
}

// Render draws the chart in w columns and h rows.
func (c latencyChart) Render(w, h int) string {
	if w < 16 || h < 4 || c.to <= c.from {
		return blankBlock(w, h)
	}
	window := (c.to - c.from).Seconds()

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
	ymax := niceCeil(math.Max(maxLat.Seconds(), 0.1))

	lc := c.scratch.lineChart(w, h, window, ymax, yLabels(ymax, h-2))
	lc.DrawXYAxisAndLabel()
	origin, gw, gh := lc.Origin(), lc.GraphWidth(), lc.GraphHeight()
	if gw < 4 || gh < 1 {
		return blankBlock(w, h)
	}

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
	graph.DrawBraillePatterns(&lc.Canvas, canvas.Point{X: origin.X + 1, Y: 0}, grid.BraillePatterns(), c.styles.ChartLine)

	// Fault windows: a heavy stretch of the time axis.
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
			lc.Canvas.SetCell(canvas.Point{X: x, Y: origin.Y}, canvas.NewCellWithStyle(markRune, c.styles.ChartMark))
		}
	}

	// Wrong answers: a mark at their start, as high as their latency.
	for i := 0; i < c.points.Len(); i++ {
		p := c.points.At(i)
		if s := p.start(); p.wrong && s >= c.from && s <= c.to {
			lc.Canvas.SetCell(canvas.Point{X: origin.X + 1 + c.column(s, gw), Y: c.row(p.latency, ymax, origin, gh)},
				canvas.NewCellWithStyle(wrongRune, c.styles.ChartWrong))
		}
	}

	// Pulls in flight: a mark at their start, as high as their age now.
	for _, s := range c.inflight {
		if s < c.from || s > c.to {
			continue
		}
		x := origin.X + 1 + c.column(s, gw)
		lc.Canvas.SetCell(canvas.Point{X: x, Y: c.row(c.to-s, ymax, origin, gh)}, canvas.NewCellWithStyle(inflightRune, c.styles.ChartInflight))
	}

	c.drawTimeLabels(&lc.Canvas, origin, gw, window)
	return renderCanvas(&lc.Canvas, c.styles)
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
func (c latencyChart) drawTimeLabels(cv *canvas.Model, origin canvas.Point, gw int, window float64) {
	y := origin.Y + 1
	step := niceCeil(window / math.Max(1, float64(gw)/10))
	right := cv.Width() // labels end before this column
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
		cv.SetStringWithStyle(canvas.Point{X: start, Y: y}, label, c.styles.ChartAxis)
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
func yLabels(ymax float64, gh int) linechart.LabelFormatter {
	return func(i int, _ float64) string {
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

// hitSparkline draws hit rates (0..1) as an ntcharts sparkline, one column a bucket.
func hitSparkline(rates []float64, styles *Styles, scratch *chartScratch) string {
	if len(rates) == 0 {
		return ""
	}
	var sl *sparkline.Model
	if scratch != nil && scratch.spark != nil && scratch.spark.Width() == len(rates) {
		sl = scratch.spark
		sl.Clear()
	} else {
		m := sparkline.New(len(rates), 1, sparkline.WithMaxValue(1), sparkline.WithNoAutoMaxValue(), sparkline.WithStyle(styles.Spark))
		sl = &m
		if scratch != nil {
			scratch.spark = sl
		}
	}
	sl.PushAll(rates)
	sl.DrawColumnsOnly()
	return renderCanvas(&sl.Canvas, styles)
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

// renderCanvas turns an ntcharts canvas into text, styling runs of cells
// by what they show.
func renderCanvas(cv *canvas.Model, styles *Styles) string {
	w, h := cv.Width(), cv.Height()
	var out, run strings.Builder
	out.Grow(w * h * 3)
	for y := 0; y < h; y++ {
		if y > 0 {
			out.WriteByte('\n')
		}
		cur := classPlain
		flush := func() {
			if run.Len() == 0 {
				return
			}
			if st := styles.class(cur); st != nil {
				out.WriteString(st.Render(run.String()))
			} else {
				out.WriteString(run.String())
			}
			run.Reset()
		}
		for x := 0; x < w; x++ {
			r := cv.Cell(canvas.Point{X: x, Y: y}).Rune
			cl := classOf(r)
			if cl != cur {
				flush()
				cur = cl
			}
			if r == 0 {
				r = ' '
			}
			run.WriteRune(r)
		}
		flush()
	}
	return out.String()
}

// blankBlock is h lines of w spaces.
func blankBlock(w, h int) string {
	if w < 0 {
		w = 0
	}
	if h <= 0 {
		return ""
	}
	line := strings.Repeat(" ", w)
	lines := make([]string, h)
	for i := range lines {
		lines[i] = line
	}
	return strings.Join(lines, "\n")
}
