package report

import (
	"slices"

	"p2pfault/event"
)

// A row is (arm, mode, case). The seed's slice has one mode, p2p, and its
// table names rows by arm and case; a mode column joins them (between
// arm and case) only when the rows are of more than one mode, so a p2p
// slice's tables stay the seed's. Text names a p2p row "arm / case" and
// another "arm / MODE / case".

// keyCols are the columns naming rows beyond arm and case: the mode when
// the rows are of more than one, and each setting a slice's --sweep
// varied (sweep.go), in the order the rows name them.
type keyCols struct {
	mode     bool
	settings []string
}

// manyModes is the key columns rows need: a mode column when they are of
// more than one mode, a column per swept setting.
func manyModes(rows []Row) keyCols {
	var k keyCols
	for _, r := range rows {
		if r.Mode != rows[0].Mode {
			k.mode = true
		}
		for _, s := range r.Settings {
			if !slices.Contains(k.settings, s.Name) {
				k.settings = append(k.settings, s.Name)
			}
		}
	}
	return k
}

// keyHead is the columns naming a row in a table.
func keyHead(k keyCols) []string {
	h := []string{"arm", "case"}
	if k.mode {
		h = []string{"arm", "mode", "case"}
	}
	return append(h, k.settings...)
}

// keyCells are r's cells under keyHead (a setting the row was not given
// is "–").
func (r Row) keyCells(k keyCols) []string {
	c := []string{r.Arm, r.Case}
	if k.mode {
		c = []string{r.Arm, r.Mode, r.Case}
	}
	for _, name := range k.settings {
		c = append(c, settingValue(r.Settings, name))
	}
	return c
}

// title names the row in text: "main / stall", "main / pd / stall", then
// its swept settings ("main / stall VLLM_P2P_HANDSHAKE_TIMEOUT_S=10").
func (r Row) title() string {
	return runTitle(r.Arm, r.Mode, r.Case, " / ") + settingsSuffix(r.Settings, " ")
}

// runTitle joins arm, mode and case with sep, leaving the mode out when it
// is p2p (the seed's, and that of a stream from before modes).
func runTitle(arm, mode, c, sep string) string {
	if event.ModeOf(mode) == event.ModeP2P {
		return arm + sep + c
	}
	return arm + sep + mode + sep + c
}
