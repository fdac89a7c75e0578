package report

import (
	"fmt"
	"slices"

	"p2pfault/event"
)

// A slice's --sweep runs each row once per value of an engine setting
// (event.RunInfo.Settings). Its rows name the setting in a column of every
// table (keyCols) and in their titles; report.html plots, per row of the
// slice that the setting does not vary (arm, mode, case and any other
// swept setting), the faulted max, the median after detect and the
// recovery time against the setting's values, with the bounds drawn.

// settingValue is the value of the setting name among settings, "–" when
// the row was not given it.
func settingValue(settings []event.Setting, name string) string {
	for _, s := range settings {
		if s.Name == name {
			return s.Value
		}
	}
	return notApplicable
}

// settingsSuffix is lead and the settings' NAME=VALUE words, or "" for a
// row without settings.
func settingsSuffix(settings []event.Setting, lead string) string {
	if len(settings) == 0 {
		return ""
	}
	return lead + event.SettingsText(settings, " ")
}

// chartSweep is one sweep chart: a row of the slice (arm, mode, case and
// the settings held fixed) over the values of one swept setting, in the
// order the rows ran them. A figure the row did not have is null.
type chartSweep struct {
	ID      string     `json:"id"`
	Title   string     `json:"title"`
	Setting string     `json:"setting"`
	Values  []string   `json:"values"`
	Max     []*float64 `json:"faulted_max_s"`
	Median  []*float64 `json:"median_after_detect_s"`
	Recover []*float64 `json:"recover_s"`
	// The bounds of the checks that judge each figure (the first row's:
	// a slice judges every row by the same ones).
	MaxBound     float64 `json:"faulted_max_bound_s"`
	MedianBound  float64 `json:"faulted_median_bound_s"`
	RecoverBound float64 `json:"recovery_window_s"`
}

// sweepCharts are the page's sweep charts: one per swept setting and per
// group of rows equal but for it, where the group has two values or more.
func sweepCharts(runs []Run, rows []Row) []chartSweep {
	var names []string
	for _, r := range rows {
		for _, s := range r.Settings {
			if !slices.Contains(names, s.Name) {
				names = append(names, s.Name)
			}
		}
	}
	var out []chartSweep
	for _, name := range names {
		var keys []string
		groups := map[string]*chartSweep{}
		for i, r := range rows {
			if settingValue(r.Settings, name) == notApplicable {
				continue
			}
			var others []event.Setting
			for _, s := range r.Settings {
				if s.Name != name {
					others = append(others, s)
				}
			}
			key := runTitle(r.Arm, r.Mode, r.Case, " / ") + settingsSuffix(others, ", ")
			g := groups[key]
			if g == nil {
				b := runs[i].Info.Bounds
				g = &chartSweep{Title: key + ": against " + name, Setting: name,
					MaxBound: b.FaultedMax.Seconds(), MedianBound: b.FaultedMedian.Seconds(), RecoverBound: b.RecoveryWindow.Seconds()}
				groups[key] = g
				keys = append(keys, key)
			}
			g.Values = append(g.Values, settingValue(r.Settings, name))
			g.Max = append(g.Max, figure(r.Faulted.N > 0, r.Faulted.Max))
			g.Median = append(g.Median, figure(r.AfterDetect != nil && r.AfterDetect.N > 0, afterDetectP50(r)))
			var rec *float64
			if r.Times != nil {
				rec = r.Times.RecoverS
			}
			g.Recover = append(g.Recover, rec)
		}
		for _, k := range keys {
			// One value is no line to read (a row folder's own page).
			if g := groups[k]; len(g.Values) > 1 {
				g.ID = fmt.Sprintf("sweep-%d", len(out))
				out = append(out, *g)
			}
		}
	}
	return out
}

func afterDetectP50(r Row) float64 {
	if r.AfterDetect == nil {
		return 0
	}
	return r.AfterDetect.P50
}

func figure(ok bool, v float64) *float64 {
	if !ok {
		return nil
	}
	return &v
}
