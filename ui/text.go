package ui

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
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

// textWidth is lipgloss.Width (the cells of the widest line, escape
// sequences not counted), reading what the dashboard draws most (ASCII,
// SGR colour escapes, braille, box and block characters, its marks)
// without segmenting graphemes: that segmenting was a third of a frame.
// Anything else (another escape, a wide or combining rune) goes to
// lipgloss.Width itself.
func textWidth(s string) int {
	widest, line := 0, 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			widest, line = max(widest, line), 0
			i++
		case c >= 0x20 && c < 0x7f:
			line++
			i++
		case c == 0x1b && i+1 < len(s) && s[i+1] == '[':
			// A CSI sequence: parameter bytes (0x30–0x3f), then
			// intermediate bytes (0x20–0x2f), then its final byte
			// (0x40–0x7e); anything else is left to lipgloss's parser.
			j := i + 2
			for j < len(s) && s[j] >= 0x30 && s[j] <= 0x3f {
				j++
			}
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
				j++
			}
			if j == len(s) || s[j] < 0x40 || s[j] > 0x7e {
				return lipgloss.Width(s)
			}
			i = j + 1
		case c < 0x80:
			return lipgloss.Width(s)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if !narrowRune(r) {
				return lipgloss.Width(s)
			}
			line++
			i += size
		}
	}
	return max(widest, line)
}

// narrowRune: runes one cell wide that the dashboard draws, and that no
// following rune can join (a combining mark or a variation selector after
// one is not narrow, so textWidth hands such a string to lipgloss).
func narrowRune(r rune) bool {
	switch {
	case r >= 0x2500 && r <= 0x259f: // box drawing, block elements
		return true
	case r >= 0x2800 && r <= 0x28ff: // braille
		return true
	}
	switch r {
	case '◆', '…', '·', '✓', '✗', '▶', '–', '×', '•', '▌':
		return true
	}
	return false
}
