package report

import (
	"slices"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// TestSweepChartsGroupRowsByWhatTheSettingDoesNotVary: a sweep of two
// settings over two arms gives, per setting, one chart per arm and value
// of the other setting, its figures in the rows' order, a missing one
// null; the tables gain a column per setting.
func TestSweepChartsGroupRowsByWhatTheSettingDoesNotVary(t *testing.T) {
	hs := func(v string) event.Setting { return event.Setting{Name: "VLLM_P2P_HANDSHAKE_TIMEOUT_S", Value: v} }
	pol := func(v string) event.Setting { return event.Setting{Name: "kv_load_failure_policy", Value: v} }
	rec := 8.5
	var runs []Run
	var rows []Row
	for _, arm := range []string{"main", "fixed"} {
		for _, h := range []string{"10", "30"} {
			for _, p := range []string{"fail", "recompute"} {
				max, _ := time.ParseDuration(h + "s")
				runs = append(runs, Run{Info: event.RunInfo{Arm: arm, Case: "stall", Bounds: event.Bounds{FaultedMax: 15 * time.Second, FaultedMedian: 2 * time.Second, RecoveryWindow: 25 * time.Second}}})
				row := Row{Arm: arm, Mode: event.ModeP2P, Case: "stall", Settings: []event.Setting{hs(h), pol(p)},
					Faulted: FaultedRow{N: 50, Max: max.Seconds()}, AfterDetect: &FaultedRow{N: 40, P50: max.Seconds() / 2}}
				if p == "recompute" {
					row.Times = &event.Times{RecoverS: &rec}
				}
				rows = append(rows, row)
			}
		}
	}
	charts := sweepCharts(runs, rows)
	var titles []string
	for _, c := range charts {
		titles = append(titles, c.Title)
	}
	want := []string{
		"main / stall, kv_load_failure_policy=fail: against VLLM_P2P_HANDSHAKE_TIMEOUT_S",
		"main / stall, kv_load_failure_policy=recompute: against VLLM_P2P_HANDSHAKE_TIMEOUT_S",
		"fixed / stall, kv_load_failure_policy=fail: against VLLM_P2P_HANDSHAKE_TIMEOUT_S",
		"fixed / stall, kv_load_failure_policy=recompute: against VLLM_P2P_HANDSHAKE_TIMEOUT_S",
		"main / stall, VLLM_P2P_HANDSHAKE_TIMEOUT_S=10: against kv_load_failure_policy",
		"main / stall, VLLM_P2P_HANDSHAKE_TIMEOUT_S=30: against kv_load_failure_policy",
		"fixed / stall, VLLM_P2P_HANDSHAKE_TIMEOUT_S=10: against kv_load_failure_policy",
		"fixed / stall, VLLM_P2P_HANDSHAKE_TIMEOUT_S=30: against kv_load_failure_policy",
	}
	if !slices.Equal(titles, want) {
		t.Fatalf("charts %q, want %q", titles, want)
	}
	c := charts[0]
	if !slices.Equal(c.Values, []string{"10", "30"}) || *c.Max[0] != 10 || *c.Max[1] != 30 || *c.Median[1] != 15 ||
		c.Recover[0] != nil || c.MaxBound != 15 || c.MedianBound != 2 || c.RecoverBound != 25 {
		t.Errorf("first chart %+v", c)
	}
	if c := charts[5]; !slices.Equal(c.Values, []string{"fail", "recompute"}) || c.Recover[0] != nil || *c.Recover[1] != 8.5 {
		t.Errorf("policy chart %+v", c)
	}
	if ids := []string{charts[0].ID, charts[7].ID}; !slices.Equal(ids, []string{"sweep-0", "sweep-7"}) {
		t.Errorf("ids %v", ids)
	}
	head := strings.Split(Table(rows[:2]), "\n")[0]
	if !strings.HasPrefix(head, "arm   case   VLLM_P2P_HANDSHAKE_TIMEOUT_S  kv_load_failure_policy  result") {
		t.Errorf("table header %q lacks the settings' columns", head)
	}
	// One value is no chart: a row folder's own page.
	if got := sweepCharts(runs[:1], rows[:1]); len(got) != 0 {
		t.Errorf("one row gave %d charts", len(got))
	}
}
