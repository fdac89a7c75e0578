package report

import (
	"bytes"
	"strings"
	"testing"

	"p2pfault/event"
)

// pdRun is mainStall's row in mode pd, rebuilt from its events.
func pdRun(t *testing.T) Run {
	t.Helper()
	f := mainStall()
	evs := f.events()
	for i := range evs {
		if evs[i].Kind == event.KindRun {
			info := *evs[i].Run
			info.Mode = event.ModePD
			evs[i].Run = &info
		}
	}
	r, err := FromEvents(evs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRowsOfTwoModesGetAModeColumn: a row is (arm, mode, case); the tables
// gain a mode column between arm and case only when the rows are of more
// than one mode, and text names a pd row arm / pd / case.
func TestRowsOfTwoModesGetAModeColumn(t *testing.T) {
	p2p, pd := mainStall().run(t), pdRun(t)
	if p2p.Row().Mode != event.ModeP2P || pd.Row().Mode != event.ModePD {
		t.Fatalf("modes %q and %q, want p2p (a stream without a mode) and pd", p2p.Row().Mode, pd.Row().Mode)
	}
	both := Table(Rows([]Run{p2p, pd}))
	lines := strings.Split(both, "\n")
	if !strings.HasPrefix(lines[0], "arm   mode  case   result") || !strings.HasPrefix(lines[1], "main  p2p   stall  FAIL") || !strings.HasPrefix(lines[2], "main  pd    stall  FAIL") {
		t.Errorf("table of two modes:\n%s", both)
	}
	if times := TimesTable(Rows([]Run{p2p, pd})); !strings.HasPrefix(times, "arm   mode  case   detect_s  recover_s\n") {
		t.Errorf("times table of two modes:\n%s", times)
	}
	steady := strings.Split(SteadyTable(Rows([]Run{p2p, pd})), "\n")
	if len(steady) < 5 || !strings.HasPrefix(steady[0], "arm   mode  case   source    pulls") || !strings.HasPrefix(steady[1], "main  p2p   stall  source-0") || !strings.HasPrefix(steady[3], "main  pd    stall  source-0") {
		t.Errorf("steady-state table of two modes:\n%s", strings.Join(steady, "\n"))
	}
	for _, runs := range [][]Run{{p2p}, {pd}} {
		if one := Table(Rows(runs)); !strings.HasPrefix(one, "arm   case   result") {
			t.Errorf("a table of one mode has a mode column:\n%s", one)
		}
		if one := SteadyTable(Rows(runs)); !strings.HasPrefix(one, "arm   case   source") {
			t.Errorf("a steady-state table of one mode has a mode column:\n%s", one)
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, Rows([]Run{p2p, pd})...); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| arm | mode | case | result |", "| main | pd | stall | FAIL |", "| arm | mode | case | source | pulls |", "| main | pd | stall | source-0 |", "**main / pd / stall** failed:"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md.String())
		}
	}
	if pd.Name() != "main/pd/stall" || p2p.Name() != "main/stall" {
		t.Errorf("names %q, %q", pd.Name(), p2p.Name())
	}
	if got := TimelineName(pd); got != "timeline-main-pd-stall.svg" {
		t.Errorf("timeline %q", got)
	}
	if got := TimelineName(p2p); got != "timeline-main-stall.svg" {
		t.Errorf("timeline of the p2p row %q changed", got)
	}
	var ju bytes.Buffer
	if err := WriteJUnit(&ju, p2p, pd); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`name="main/pd/stall"`, `<property name="mode" value="pd">`, `classname="p2pfault.main.pd.stall"`, `classname="p2pfault.main.stall"`} {
		if !strings.Contains(ju.String(), want) {
			t.Errorf("junit.xml lacks %s", want)
		}
	}
	if strings.Count(ju.String(), `name="mode"`) != 1 {
		t.Errorf("junit.xml: want a mode property on the pd suite only")
	}
	// The seed's table is of p2p mode: a pd row is not compared with it.
	for _, c := range CompareSeed(Rows([]Run{p2p, pd}), SeedScale{TimeScale: 1, Interval: SeedInterval}) {
		if c.Arm == "main" && c.Case == "stall" && c.Cell == "faulted n" && c.Sim != "54" {
			t.Errorf("compare-seed compared another row: %+v", c)
		}
	}
	if n := len(CompareSeed(Rows([]Run{pd}), SeedScale{TimeScale: 1})); n != 0 {
		t.Errorf("compare-seed compared %d cells of a pd row", n)
	}
}
