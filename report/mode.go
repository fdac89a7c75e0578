package report

import "p2pfault/event"

// A row is (arm, mode, case). The seed's slice has one mode, p2p, and its
// table names rows by arm and case; a mode column joins them (between
// arm and case) only when the rows are of more than one mode, so a p2p
// slice's tables stay the seed's. Text names a p2p row "arm / case" and
// another "arm / MODE / case".

// manyModes reports whether rows are of more than one mode.
func manyModes(rows []Row) bool {
	for _, r := range rows {
		if r.Mode != rows[0].Mode {
			return true
		}
	}
	return false
}

// keyHead is the columns naming a row in a table.
func keyHead(withMode bool) []string {
	if withMode {
		return []string{"arm", "mode", "case"}
	}
	return []string{"arm", "case"}
}

// keyCells are r's cells under keyHead.
func (r Row) keyCells(withMode bool) []string {
	if withMode {
		return []string{r.Arm, r.Mode, r.Case}
	}
	return []string{r.Arm, r.Case}
}

// title names the row in text: "main / stall", "main / pd / stall".
func (r Row) title() string { return runTitle(r.Arm, r.Mode, r.Case, " / ") }

// runTitle joins arm, mode and case with sep, leaving the mode out when it
// is p2p (the seed's, and that of a stream from before modes).
func runTitle(arm, mode, c, sep string) string {
	if event.ModeOf(mode) == event.ModeP2P {
		return arm + sep + c
	}
	return arm + sep + mode + sep + c
}
