package cli

import (
	"strings"

	"p2pfault/fault"
)

// The help texts name fault kinds from the registry, never by hand, so a
// kind registered later appears in every one of them (help_test.go).

// seedCasesList is the seed's slice cases for a list: "stall, kill,
// remove".
func seedCasesList() string { return strings.Join(fault.SeedCases(), ", ") }

// seedCasesProse is the seed's slice cases as prose: "stall, kill and
// remove".
func seedCasesProse() string {
	cs := fault.SeedCases()
	if len(cs) < 2 {
		return strings.Join(cs, "")
	}
	return strings.Join(cs[:len(cs)-1], ", ") + " and " + cs[len(cs)-1]
}

// wrap fills text's words into lines of at most width columns, each line
// as full as it goes: a help paragraph whose list of kinds grows is
// wrapped again.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(text) {
		switch {
		case n == 0:
		case n+1+len(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
