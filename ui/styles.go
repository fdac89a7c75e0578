package ui

import (
	"os"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Styles are every style the dashboard uses, built from one renderer so a
// pinned colour profile (NO_COLOR, golden tests) applies to all of them.
// Plain ANSI colours only: adaptive colours would query the terminal.
type Styles struct {
	Title     Style
	Dim       Style
	Label     Style
	Selected  Style
	Section   Style
	Phase     Style
	Countdown Style

	Ready      Style
	Stalled    Style
	Killed     Style
	Restarting Style
	Removed    Style
	Starting   Style

	ChartAxis lipgloss.Style
	ChartLine lipgloss.Style
	ChartMark lipgloss.Style
	// ChartInflight draws pulls still in flight, apart from finished ones.
	ChartInflight lipgloss.Style
	// ChartWrong marks pulls that returned other text than the source's.
	ChartWrong lipgloss.Style
	Spark      lipgloss.Style

	Pass Style
	Fail Style
	Info Style
	Warn Style
	Err  Style
	Flt  Style

	Help help.Styles

	// runs is each chart class's style worked out once (chart.go).
	runs [numClasses]runStyle
}

// NewStyles builds the dashboard's styles on r.
func NewStyles(r *lipgloss.Renderer) Styles {
	c := func(code string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(code)) }
	f := newStyle
	dim := c("8")
	s := Styles{
		Title:     f(r.NewStyle().Bold(true)),
		Dim:       f(dim),
		Label:     f(c("12")),
		Selected:  f(r.NewStyle().Bold(true).Reverse(true)),
		Section:   f(r.NewStyle().Bold(true).Underline(true)),
		Phase:     f(r.NewStyle().Bold(true).Foreground(lipgloss.Color("13"))),
		Countdown: f(r.NewStyle().Bold(true).Foreground(lipgloss.Color("11"))),

		Ready:      f(r.NewStyle().Bold(true).Foreground(lipgloss.Color("10"))),
		Stalled:    f(r.NewStyle().Bold(true).Foreground(lipgloss.Color("11"))),
		Killed:     f(r.NewStyle().Bold(true).Foreground(lipgloss.Color("9"))),
		Restarting: f(r.NewStyle().Bold(true).Foreground(lipgloss.Color("14"))),
		Removed:    f(r.NewStyle().Bold(true).Foreground(lipgloss.Color("8"))),
		Starting:   f(r.NewStyle().Foreground(lipgloss.Color("14"))),

		ChartAxis:     dim,
		ChartLine:     c("12"),
		ChartMark:     c("9"),
		ChartInflight: c("11"),
		ChartWrong:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("9")),
		Spark:         c("10"),

		Pass: f(c("10")),
		Fail: f(r.NewStyle().Bold(true).Foreground(lipgloss.Color("9"))),
		Info: f(r.NewStyle()),
		Warn: f(c("11")),
		Err:  f(c("9")),
		Flt:  f(c("13")),

		Help: help.Styles{
			Ellipsis:       dim,
			ShortKey:       c("12"),
			ShortDesc:      dim,
			ShortSeparator: dim,
			FullKey:        c("12"),
			FullDesc:       dim,
			FullSeparator:  dim,
		},
	}
	for cl := range numClasses {
		if st := s.class(cl); st != nil {
			s.runs[cl] = newRunStyle(*st)
		}
	}
	return s
}

// terminalRenderer is the renderer for the real terminal: a non-empty
// NO_COLOR (no-color.org) pins the plain ASCII profile.
func terminalRenderer() *lipgloss.Renderer {
	r := lipgloss.NewRenderer(os.Stdout)
	if os.Getenv("NO_COLOR") != "" {
		r.SetColorProfile(termenv.Ascii)
	}
	return r
}

func (s *Styles) badge(k badgeKind) Style {
	switch k {
	case badgeReady:
		return s.Ready
	case badgeStalled, badgeNetwork:
		return s.Stalled
	case badgeKilled, badgeExited:
		return s.Killed
	case badgeRestarting:
		return s.Restarting
	case badgeRemoved:
		return s.Removed
	default:
		return s.Starting
	}
}

func (s *Styles) level(l logLevel) Style {
	switch l {
	case levelFault:
		return s.Flt
	case levelWarn:
		return s.Warn
	case levelError:
		return s.Err
	default:
		return s.Info
	}
}

// Style is a lipgloss.Style that renders one line of plain text (no tab,
// newline, carriage return or escape in it) as the escapes lipgloss would
// put around it, worked out once when it is made: lipgloss works out a
// style's escapes on every call, a few microseconds each, and a frame
// renders a few hundred labels. It falls back to lipgloss for any other
// text, and for a style whose output is not one pair of escapes around
// the text (underlined text, whose spaces lipgloss styles apart).
type Style struct {
	lipgloss.Style
	run runStyle
}

func newStyle(st lipgloss.Style) Style {
	rs := newRunStyle(st)
	for _, probe := range []string{"ab", "a b", " x  y "} {
		if rs.ok && st.Render(probe) != rs.prefix+probe+rs.suffix {
			rs = runStyle{}
		}
	}
	return Style{Style: st, run: rs}
}

// Render is lipgloss.Style.Render, the same bytes.
func (s Style) Render(strs ...string) string {
	if len(strs) != 1 || !s.run.ok || !plainLine(strs[0]) {
		return s.Style.Render(strs...)
	}
	return s.run.prefix + strs[0] + s.run.suffix
}

// plainLine: non-empty text lipgloss renders as is between a style's
// escapes.
func plainLine(t string) bool {
	if t == "" {
		return false
	}
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '\n', '\r', '\t', 0x1b:
			return false
		}
	}
	return true
}
