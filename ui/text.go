package ui

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// clean makes text from an engine or an error safe to put on screen: a log
// line's own colours or cursor moves would corrupt the dashboard's layout.
func clean(s string) string {
	s = ansi.Strip(s)
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case isControl(r):
			return -1
		}
		return r
	}, s)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func cleanLines(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = clean(l)
	}
	return out
}
