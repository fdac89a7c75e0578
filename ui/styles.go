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
	Title     lipgloss.Style
	Dim       lipgloss.Style
	Label     lipgloss.Style
	Selected  lipgloss.Style
	Section   lipgloss.Style
	Phase     lipgloss.Style
	Countdown lipgloss.Style

	Ready      lipgloss.Style
	Stalled    lipgloss.Style
	Killed     lipgloss.Style
	Restarting lipgloss.Style
	Removed    lipgloss.Style
	Starting   lipgloss.Style

	ChartAxis lipgloss.Style
	ChartLine lipgloss.Style
	ChartMark lipgloss.Style
	// ChartInflight draws pulls still in flight, apart from finished ones.
	ChartInflight lipgloss.Style
	Spark         lipgloss.Style

	Pass lipgloss.Style
	Fail lipgloss.Style
	Info lipgloss.Style
	Warn lipgloss.Style
	Err  lipgloss.Style
	Flt  lipgloss.Style

	Help help.Styles

	// runs is each chart class's style worked out once (chart.go).
	runs [numClasses]runStyle
}

// NewStyles builds the dashboard's styles on r.
func NewStyles(r *lipgloss.Renderer) Styles {
	c := func(code string) lipgloss.Style { return r.NewStyle().Foreground(lipgloss.Color(code)) }
	dim := c("8")
	s := Styles{
		Title:     r.NewStyle().Bold(true),
		Dim:       dim,
		Label:     c("12"),
		Selected:  r.NewStyle().Bold(true).Reverse(true),
		Section:   r.NewStyle().Bold(true).Underline(true),
		Phase:     r.NewStyle().Bold(true).Foreground(lipgloss.Color("13")),
		Countdown: r.NewStyle().Bold(true).Foreground(lipgloss.Color("11")),

		Ready:      r.NewStyle().Bold(true).Foreground(lipgloss.Color("10")),
		Stalled:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("11")),
		Killed:     r.NewStyle().Bold(true).Foreground(lipgloss.Color("9")),
		Restarting: r.NewStyle().Bold(true).Foreground(lipgloss.Color("14")),
		Removed:    r.NewStyle().Bold(true).Foreground(lipgloss.Color("8")),
		Starting:   r.NewStyle().Foreground(lipgloss.Color("14")),

		ChartAxis:     dim,
		ChartLine:     c("12"),
		ChartMark:     c("9"),
		ChartInflight: c("11"),
		Spark:         c("10"),

		Pass: c("10"),
		Fail: r.NewStyle().Bold(true).Foreground(lipgloss.Color("9")),
		Info: r.NewStyle(),
		Warn: c("11"),
		Err:  c("9"),
		Flt:  c("13"),

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

func (s *Styles) badge(k badgeKind) lipgloss.Style {
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

func (s *Styles) level(l logLevel) lipgloss.Style {
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
