package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"

	"p2pfault/event"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Timeline size: wide enough for a 90-s run at 2 pulls a second a source.
const (
	svgWidth  = 10 * vg.Inch
	svgHeight = 5 * vg.Inch
)

// Shades of the fault and recovery windows: light enough that the points
// over them stay readable.
func faultShade() color.Color    { return color.NRGBA{R: 220, G: 60, B: 60, A: 40} }
func recoveryShade() color.Color { return color.NRGBA{R: 60, G: 110, B: 200, A: 35} }

// WriteSVG draws the run's timeline: pull latency against the time the pull
// was sent, one colour per source, hits as dots, misses as crosses and
// failed requests (non-200) as triangles; fault windows shaded red,
// recovery windows blue; a dashed line at the faulted_max bound.
func WriteSVG(w io.Writer, run Run) error {
	p, err := timelinePlot(run)
	if err != nil {
		return err
	}
	c := vgsvg.New(svgWidth, svgHeight)
	p.Draw(draw.New(c))
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("write timeline of %s: %w", run.Name(), err)
	}
	return nil
}

// timelinePlot is the timeline as a plot, whatever it is drawn on.
func timelinePlot(run Run) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = runTitle(run.Info.Arm, run.Info.Mode, run.Info.Case, " / ") + settingsSuffix(run.Info.Settings, " ")
	p.X.Label.Text = "seconds since t0"
	p.Y.Label.Text = "pull latency (s)"
	p.Legend.Top = true
	// Top left: the faulted pulls of a stall start after the fault, so the
	// corner before it is empty; on the right the legend was clipped.
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	p.Add(plotter.NewGrid())

	addWindowBands(p, run)
	if err := addLatencySeries(p, run); err != nil {
		return nil, err
	}
	bound := run.Info.Bounds.FaultedMax.Seconds()
	if bound > 0 {
		line := plotter.NewFunction(func(float64) float64 { return bound })
		line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		line.Color = color.NRGBA{R: 180, A: 255}
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("faulted bound %.1f s", bound), line)
	}

	// Keep the bound, t0 and the run end in view even when every pull
	// was fast, so a reader sees how far from the bound the run stayed;
	// the headroom on top is where the legend goes, clear of the data.
	p.Y.Min = 0
	p.Y.Max = math.Max(p.Y.Max, bound) * 1.45
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	p.X.Min = math.Min(p.X.Min, 0)
	p.X.Max = math.Max(p.X.Max, run.RunEnd.Seconds())
	if p.X.Max <= p.X.Min {
		p.X.Max = p.X.Min + 1
	}
	return p, nil
}

// addWindowBands shades each fault window and its recovery window.
func addWindowBands(p *plot.Plot, run Run) {
	for _, win := range run.Windows {
		p.Add(&band{from: win.Start.Seconds(), to: win.End.Seconds(), color: faultShade()})
		if win.Recovers && run.Info.Bounds.RecoveryWindow > 0 {
			to := min(win.End+run.Info.Bounds.RecoveryWindow, max(run.RunEnd, win.End))
			p.Add(&band{from: win.End.Seconds(), to: to.Seconds(), color: recoveryShade()})
		}
	}
	if len(run.Windows) > 0 {
		p.Legend.Add("fault window", &band{color: faultShade()})
		if run.Windows[0].Recovers {
			p.Legend.Add("recovery window", &band{color: recoveryShade()})
		}
	}
}

// addLatencySeries plots every pull at its start time and latency, one
// series per source and outcome (hit, miss, error).
func addLatencySeries(p *plot.Plot, run Run) error {
	kinds := []struct {
		label string
		glyph draw.GlyphDrawer
		keep  func(event.Sample) bool
	}{
		{"hit", draw.CircleGlyph{}, func(s event.Sample) bool { return s.Hit() }},
		{"miss", draw.CrossGlyph{}, func(s event.Sample) bool { return s.Status == 200 && !s.Hit() }},
		{"error", draw.TriangleGlyph{}, func(s event.Sample) bool { return s.Status != 200 }},
	}
	for _, src := range sources(run) {
		col := sourceColor(src)
		for _, k := range kinds {
			var xys plotter.XYs
			for _, s := range run.Samples {
				if s.Source == src && k.keep(s) {
					xys = append(xys, plotter.XY{X: s.Start.Seconds(), Y: s.Latency.Seconds()})
				}
			}
			if len(xys) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xys)
			if err != nil {
				return fmt.Errorf("timeline %s: source %d %s series: %w", run.Name(), src, k.label, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(2.5), Shape: k.glyph}
			p.Add(sc)
			p.Legend.Add(fmt.Sprintf("source %d %s", src, k.label), sc)
		}
	}
	return nil
}

// sources is every source index the samples name, in order.
func sources(run Run) []int {
	var out []int
	for _, s := range run.Samples {
		if !slices.Contains(out, s.Source) {
			out = append(out, s.Source)
		}
	}
	slices.Sort(out)
	return out
}

// sourceColor is source i's colour from plotutil's palette. Taken modulo
// here: plotutil.Color indexes past its palette for negative multiples of
// its length, and a source index read from a damaged log may be anything.
func sourceColor(i int) color.Color {
	n := len(plotutil.DefaultColors)
	return plotutil.Color((i%n + n) % n)
}

// band shades the x range [from, to) over the whole height of the plot.
type band struct {
	from, to float64
	color    color.Color
}

func (b *band) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x0, x1 := trX(b.from), trX(b.to)
	x0 = max(x0, c.Min.X)
	x1 = min(x1, c.Max.X)
	if x1 <= x0 {
		return
	}
	c.FillPolygon(b.color, []vg.Point{
		{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y},
	})
}

// DataRange keeps the window in view; it adds nothing to the y range.
func (b *band) DataRange() (xmin, xmax, ymin, ymax float64) {
	return b.from, b.to, math.Inf(1), math.Inf(-1)
}

// Thumbnail is the band's legend swatch.
func (b *band) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.color, []vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y},
	})
}
