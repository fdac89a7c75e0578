package ui

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// TestDashboardInTmuxRankPicker drives the rank picker of a run whose
// sources have two data-parallel ranks (--source-dp 2, the simulated
// cluster, real processes: what it reads of the stall is /proc's state of
// source-0's members, which only a process shows; the stall's figures are
// experiment's TestRankStallOnTheVirtualCluster): d moves the keys'
// target from the whole engine to rank 0 and rank 1, s stalls rank 1
// alone — its badge, on source-0's title and rank1's line only, one of
// source-0's processes stopped, rank 0 still hitting — and c resumes it.
func TestDashboardInTmuxRankPicker(t *testing.T) {
	bin := e2eBinary(t, "the rank picker's terminal test")
	const wait = 90 * time.Second // generous: two shared cores, others compiling
	// Time compressed 5×, as the stall test's: the stalled rank's pulls
	// end at the 1.6 s lookup deadline. The key's stall lasts --stall-for,
	// 60 s scaled: it ends on c, not by itself while the test reads it.
	pane, rp := startDashboard(t, bin, "p2pfault-rank", wait, "--source-dp", "2", "--time-scale", "0.2", "--stall-for", "5m")
	pane.waitFor("both ranks of source-0 hitting", wait, func(s string) bool {
		return rankHits(s, 0, 0) > 0 && rankHits(s, 0, 1) > 0
	})
	rec, err := rp.note()
	if err != nil || len(rec.Engines) != 3 {
		t.Fatalf("sessions.json while running: %v, %d engines (want 3)", err, len(rec.Engines))
	}
	src0 := engineOf(t, rec, event.SourceName(0))

	// One key a call, each waited for: keys sent at once reach the
	// dashboard as one message of several runes, which no binding matches.
	for _, want := range []string{"target source-0/rank0", "target source-0/rank1"} {
		pane.send("d")
		pane.waitFor("d to move the picker to "+want, wait, func(s string) bool { return strings.Contains(s, want) })
	}

	pane.send("s")
	// The event log says so first; its lines scroll on as the pulls wait.
	pane.waitFor("the log to say the stall of source-0/rank1 took effect", wait, func(s string) bool {
		return strings.Contains(s, "stall source-0/rank1 (key)") && strings.Contains(s, "stall source-0/rank1 took effect")
	})
	// Its pulls wait for the lookup deadline and miss: once the rolling
	// window holds none from before the stall, rank1 shows no hit (or no
	// pull ended), while rank0 goes on hitting.
	screen := pane.waitFor("rank1 of source-0 STALLED and missing, rank0 hitting", wait, func(s string) bool {
		return strings.Contains(s, "▶ source-0  rank1 STALLED") && strings.HasPrefix(rankCell(s, 0, 1), "rank1 STALLED") &&
			rankHits(s, 0, 1) <= 0 && rankHits(s, 0, 0) > 0
	})
	for _, c := range []string{rankCell(screen, 0, 0), rankCell(screen, 1, 0), rankCell(screen, 1, 1)} {
		if strings.Contains(c, "STALLED") {
			t.Errorf("only source-0's rank1 is stalled, yet %q:\n%s", c, screen)
		}
	}
	if strings.Count(screen, "STALLED") != 2 {
		t.Errorf("STALLED should be on source-0's title and rank1's line only:\n%s", screen)
	}
	// The mechanism: one engine core stopped, the front end and the
	// other core running.
	if stopped := stoppedOf(src0); len(stopped) != 1 || stopped[0] == src0.Pid {
		t.Errorf("source-0's stopped processes = %v, want one engine core (members %v, front end %d)", stopped, src0.Members, src0.Pid)
	}

	pane.send("c")
	pane.waitFor("source-0 READY, rank1 hitting again", wait, func(s string) bool {
		return strings.Contains(s, "▶ source-0  READY") && !strings.Contains(s, "STALLED") && rankHits(s, 0, 1) > 0
	})
	if stopped := stoppedOf(src0); len(stopped) != 0 {
		t.Errorf("after c source-0's processes %v are still stopped", stopped)
	}
	quitAndCheck(t, pane, rp, wait)
}

// rankCellRe finds the start of a rank's cell on a rank line.
var rankCellRe = regexp.MustCompile(`(?:^|  )rank(\d+) `)

// rankCell is rank r's cell of source i's rank lines ("rank1 p50 0.04s
// max 0.05s hits 100%", "rank1 STALLED 28s no pulls"), "" if none.
func rankCell(screen string, i, r int) string {
	for _, part := range panelLines(screen, i) {
		if !strings.HasPrefix(part, "rank") {
			continue
		}
		locs := rankCellRe.FindAllStringSubmatchIndex(part, -1)
		for k, loc := range locs {
			if part[loc[2]:loc[3]] != strconv.Itoa(r) {
				continue
			}
			end := len(part)
			if k+1 < len(locs) {
				end = locs[k+1][0]
			}
			return strings.TrimSpace(part[loc[0]:end])
		}
	}
	return ""
}

var rankHitsRe = regexp.MustCompile(`hits (\d+)%`)

// rankHits is rank r of source i's hit rate over the rolling window, in
// percent; -1 while it shows none.
func rankHits(screen string, i, r int) int {
	m := rankHitsRe.FindStringSubmatch(rankCell(screen, i, r))
	if m == nil {
		return -1
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

// engineOf is the named engine of rec, with its members.
func engineOf(t *testing.T, rec sessionsRecord, name string) engineRecord {
	t.Helper()
	for _, e := range rec.Engines {
		if e.Engine == name {
			if len(e.Members) < 3 {
				t.Fatalf("%s has members %v, want its front end and two engine cores", name, e.Members)
			}
			return e
		}
	}
	t.Fatalf("no %s in sessions.json: %+v", name, rec.Engines)
	return engineRecord{}
}

// stoppedOf is the pids of e's members that are stopped (state T) now.
func stoppedOf(e engineRecord) []int {
	var out []int
	for _, p := range e.Members {
		if st, ok := readProcStat(p.Pid); ok && st.startTicks == p.StartTicks && st.state == "T" {
			out = append(out, p.Pid)
		}
	}
	return out
}
