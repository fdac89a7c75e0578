package ui

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/NimbleMarkets/ntcharts/sparkline"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// canvasRunes is what an ntcharts canvas shows, without styles.
func canvasRunes(cv *canvas.Model) string {
	var b strings.Builder
	for y := 0; y < cv.Height(); y++ {
		if y > 0 {
			b.WriteByte('\n')
		}
		for x := 0; x < cv.Width(); x++ {
			r := cv.Cell(canvas.Point{X: x, Y: y}).Rune
			if r == 0 {
				r = ' '
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

func gridRunes(g *runeGrid) string {
	st := NewStyles(asciiRenderer())
	return renderGrid(g, &st)
}

// The chart's frame on the rune grid is ntcharts' linechart frame (axes
// and Y labels, X and Y steps of 1), which the dashboard drew before.
func TestChartFrameIsLinechartsFrame(t *testing.T) {
	for _, size := range []struct{ w, h int }{{16, 4}, {39, 11}, {70, 12}, {120, 20}} {
		for _, ymax := range []float64{0.1, 0.5, 2, 30, 300} {
			yFmt := yLabels(ymax, size.h-2)
			lc := linechart.New(size.w, size.h, -60, 0, 0, ymax,
				linechart.WithXYSteps(1, 1),
				linechart.WithXLabelFormatter(func(int, float64) string { return "" }),
				linechart.WithYLabelFormatter(func(i int, _ float64) string { return yFmt(i) }),
			)
			lc.DrawXYAxisAndLabel()
			var g runeGrid
			g.reset(size.w, size.h)
			f := g.frame(size.w, size.h, yFmt)
			if want, got := canvasRunes(&lc.Canvas), gridRunes(&g); got != want {
				t.Errorf("%dx%d ymax %g:\ngrid\n%s\nlinechart\n%s", size.w, size.h, ymax, got, want)
			}
			if f.origin.x != lc.Origin().X || f.origin.y != lc.Origin().Y || f.gw != lc.GraphWidth() || f.gh != lc.GraphHeight() {
				t.Errorf("%dx%d ymax %g: origin %v %dx%d, linechart %v %dx%d", size.w, size.h, ymax,
					f.origin, f.gw, f.gh, lc.Origin(), lc.GraphWidth(), lc.GraphHeight())
			}
		}
	}
}

// The hit-rate line is ntcharts' one-row sparkline of the same rates.
func TestHitSparklineIsNtchartsSparkline(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	st := NewStyles(asciiRenderer())
	for k := range 200 {
		rates := make([]float64, sparkBuckets)
		for i := range rates {
			switch k % 3 {
			case 0:
				rates[i] = float64(rng.IntN(65)) / 64
			case 1:
				rates[i] = rng.Float64()
			default:
				rates[i] = float64(rng.IntN(2))
			}
		}
		sl := sparkline.New(len(rates), 1, sparkline.WithMaxValue(1), sparkline.WithNoAutoMaxValue())
		sl.PushAll(rates)
		sl.DrawColumnsOnly()
		if want, got := canvasRunes(&sl.Canvas), hitSparkline(rates, &st); got != want {
			t.Fatalf("rates %v:\ngot  %q\nwant %q", rates, got, want)
		}
	}
}

// A run of cells written with a style's escapes worked out once reads
// exactly as lipgloss renders it, in colour and without.
func TestRunStylesRenderAsLipgloss(t *testing.T) {
	for _, profile := range []termenv.Profile{termenv.ANSI256, termenv.TrueColor, termenv.ANSI, termenv.Ascii} {
		r := lipgloss.NewRenderer(nil)
		r.SetColorProfile(profile)
		st := NewStyles(r)
		if colour := strings.Contains(st.ChartLine.Render("x"), "\x1b["); colour != (profile != termenv.Ascii) {
			t.Fatalf("profile %v: escapes %v, want them exactly with a colour profile", profile, colour)
		}
		for cl := range numClasses {
			style := st.class(cl)
			if style == nil {
				continue
			}
			if !st.runs[cl].ok {
				t.Errorf("profile %v class %d: no run style worked out", profile, cl)
				continue
			}
			for _, text := range []string{"⠁⠂⠄", "━━━", "◆", "└───", "20s", "▁▂▃█", " "} {
				var b strings.Builder
				st.writeRun(&b, cl, []rune(text))
				if want := style.Render(text); b.String() != want {
					t.Errorf("profile %v class %d %q: %q, lipgloss %q", profile, cl, text, b.String(), want)
				}
			}
		}
	}
}

// textWidth is lipgloss.Width on what the dashboard draws and on what it
// does not (wide, combining and joined runes, other escapes).
func TestTextWidthIsLipglossWidth(t *testing.T) {
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.ANSI256)
	st := NewStyles(r)
	parts := []string{
		"p50", " ", "0.02s", "⠁⠂⣿", "━━", "◆", "└──", "│", "…", "·", "✓", "✗", "▶", "–", "×", "•", "▌", "▁▂█",
		st.ChartLine.Render("⡇⢸"), st.Pass.Render("✓"), st.Selected.Render("▶ source-0"), st.Section.Render("checks"),
		"\n", "日本", "e\u0301", "▶\ufe0f", "👍🏽", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "\t", "\x1b[", "é",
	}
	for _, r := range []rune("◆…·✓✗▶–×•▌") {
		if w := lipgloss.Width(string(r)); w != 1 {
			t.Errorf("%q is %d cells wide to lipgloss, but textWidth counts it as 1", r, w)
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for range 5000 {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		s := b.String()
		if got, want := textWidth(s), lipgloss.Width(s); got != want {
			t.Fatalf("textWidth(%q) = %d, lipgloss.Width %d", s, got, want)
		}
	}
}

func TestJoinBlocksIsLipglossJoin(t *testing.T) {
	a := block([]string{"a1", "⠁⠂", "a3"}, 5, 3)
	b := block([]string{"b1", "◆ b2"}, 7, 3)
	c := block([]string{"c"}, 4, 3)
	for _, tc := range []struct {
		blocks []string
		pad    int
	}{{[]string{a, b, c}, 0}, {[]string{a}, 11}, {[]string{a, b}, 4}} {
		width := 16
		want := lipgloss.JoinVertical(lipgloss.Left, block([]string{""}, width, 1), lipgloss.JoinHorizontal(lipgloss.Top, tc.blocks...))
		got := block([]string{""}, width, 1) + "\n" + joinBlocks(tc.blocks, 3, tc.pad)
		if got != want {
			t.Errorf("pad %d:\n%q\nlipgloss\n%q", tc.pad, got, want)
		}
	}
}

// Every Style renders any text exactly as its lipgloss.Style does, in
// colour and without: plain lines through the escapes worked out once,
// anything else through lipgloss.
func TestStylesRenderAsLipgloss(t *testing.T) {
	texts := []string{"p50", "in flight 24, oldest 12.0s", " x ", "STALLED 1.7s", "▶ source-0", "✗", "日本語",
		"", "a\tb", "two\nlines", "cr\r\nlf", "\x1b[1mbold\x1b[0m", "  source-0"}
	for _, profile := range []termenv.Profile{termenv.ANSI256, termenv.TrueColor, termenv.ANSI, termenv.Ascii} {
		r := lipgloss.NewRenderer(nil)
		r.SetColorProfile(profile)
		st := NewStyles(r)
		v := reflect.ValueOf(st)
		fast := 0
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue
			}
			f, ok := v.Field(i).Interface().(Style)
			if !ok {
				continue
			}
			if f.run.ok {
				fast++
			}
			for _, text := range texts {
				if got, want := f.Render(text), f.Style.Render(text); got != want {
					t.Errorf("profile %v %s.Render(%q) = %q, lipgloss %q", profile, v.Type().Field(i).Name, text, got, want)
				}
			}
		}
		if fast < 10 {
			t.Errorf("profile %v: %d styles with their escapes worked out, want most", profile, fast)
		}
	}
}
