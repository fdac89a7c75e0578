package ui

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"p2pfault/event"
	"p2pfault/fault"
)

// FireArm lets the fake stand for a several-arm run (ArmController).
func (f *fakeCtrl) FireArm(arm string, a fault.Action) error {
	if err := f.refusal(arm, a); err != nil {
		return err
	}
	return f.record(fmt.Sprintf("%s: %s %d", arm, a.Kind.Name, a.Source))
}

var _ ArmController = (*fakeCtrl)(nil)

// armScript is one arm of a stall run up to `to`: source-0 stalled at
// 10 s; on main its pulls hang (sent, never ended), on fixed they prefill
// at once. With end, the stall is over at 40 s and the run ends with its
// verdict (main fails, fixed passes).
func armScript(arm string, to time.Duration, end bool) *script {
	s := stalledAt10s()
	s.events[0].Run = func() *event.RunInfo { r := *s.events[0].Run; r.Arm = arm; return &r }()
	s.add(10*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseFault})
	s.engine(10100*time.Millisecond, engineInfo("source-0", 0, event.StateStopped, 4200, 29*time.Second))
	hangTo := to
	if end {
		hangTo = 40 * time.Second
	}
	if arm == "main" {
		// Source-0's pulls are sent and hang: those sent in the first 4 s
		// end on the handshake deadline 16.1 s later, the rest are still
		// in flight at `to` (or end at once when the stall ends at 40 s).
		// Their started events carry the trials s.samples will give them.
		base := s.trial
		k := int64(0)
		for t := 10 * time.Second; t < hangTo; t += 500 * time.Millisecond {
			s.add(t, event.Event{Kind: event.KindPullStart, Pulls: []event.PullStart{{Source: 0, Trial: base + 2*k + 1, Start: t}}})
			k++
		}
		s.samples(2, 10*time.Second, hangTo, 500*time.Millisecond, func(i int, start time.Duration, trial int64) (time.Duration, bool) {
			switch {
			case i != 0:
				return healthy(i, start, trial)
			case start < 14*time.Second:
				return 16100 * time.Millisecond, false
			case end:
				return 40*time.Second - start - 10*time.Millisecond, false
			}
			return time.Hour, false // still hanging at the end of the scene
		})
	} else {
		s.samples(2, 10*time.Second, hangTo, 500*time.Millisecond, func(i int, start time.Duration, trial int64) (time.Duration, bool) {
			if i == 0 {
				return 20 * time.Millisecond, false // prefilled locally
			}
			return healthy(i, start, trial)
		})
	}
	if !end {
		s.verdict(to, liveVerdict(arm == "fixed"), false)
		return s
	}
	s.fault(40*time.Second, fault.ActionResume, 0, 0)
	s.cond(40*time.Second, event.ConditionInfo{Source: 0, Condition: event.CondUp, Label: "READY"})
	s.window(40*time.Second, event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second, Recovers: true})
	s.engine(40*time.Second, engineInfo("source-0", 0, event.StateReady, 4200, 59*time.Second))
	s.samples(2, 40*time.Second, 65*time.Second, 500*time.Millisecond, healthy)
	s.add(65*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseDone})
	s.verdict(65*time.Second, liveVerdict(arm == "fixed"), true)
	code, msg := 1, "a bound failed"
	if arm == "fixed" {
		code, msg = 0, "run complete"
	}
	s.add(65*time.Second, event.Event{Kind: event.KindEnd, Message: msg, ExitCode: code})
	return s
}

// merge stamps each arm's events with its arm and merges them in time
// order, arms in the order given at equal times, as experiment.Group's bus
// sends them.
func merge(arms map[string]*script, order ...string) []event.Event {
	var all []event.Event
	for _, a := range order {
		for _, ev := range arms[a].events {
			ev.Arm = a
			all = append(all, ev)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].T < all[j].T })
	for i := range all {
		all[i].Seq = int64(i + 1)
	}
	return all
}

func sceneArmsStalled() scene {
	to := 30 * time.Second
	ev := merge(map[string]*script{"main": armScript("main", to, false), "fixed": armScript("fixed", to, false)}, "main", "fixed")
	return scene{events: ev, now: to, ctrl: newFakeCtrl()}
}

func sceneArmsEnded() scene {
	ev := merge(map[string]*script{"main": armScript("main", 0, true), "fixed": armScript("fixed", 0, true)}, "main", "fixed")
	return scene{events: ev, now: 66 * time.Second, ctrl: newFakeCtrl()}
}

func TestArmsViewsMatchGolden(t *testing.T) {
	for _, sc := range []struct {
		name  string
		scene func() scene
	}{{"arms_stalled", sceneArmsStalled}, {"arms_ended", sceneArmsEnded}} {
		for _, size := range []struct{ w, h int }{{160, 48}, {100, 30}} {
			t.Run(fmt.Sprintf("%s_%dx%d", sc.name, size.w, size.h), func(t *testing.T) {
				out := feed(t, sc.scene(), size.w, size.h).View()
				assertFits(t, out, size.w, size.h)
				golden.RequireEqual(t, []byte(out))
			})
		}
	}
}

// TestArmsLayoutSideBySideOrStacked: at 160 columns the arms' titles share
// a line; below 140 they are on lines of their own, main above fixed.
func TestArmsLayoutSideBySideOrStacked(t *testing.T) {
	row := func(out, what string) int {
		for i, l := range strings.Split(out, "\n") {
			if strings.Contains(l, what) {
				return i
			}
		}
		t.Fatalf("no %q in the view:\n%s", what, out)
		return -1
	}
	wide := feed(t, sceneArmsStalled(), 160, 48).View()
	if m, f := row(wide, "▌main"), row(wide, "▌fixed"); m != f {
		t.Errorf("160 columns: main's title on line %d, fixed's on %d: want side by side", m, f)
	}
	for _, w := range []int{139, 100, 80} {
		narrow := feed(t, sceneArmsStalled(), w, 40).View()
		if m, f := row(narrow, "▌main"), row(narrow, "▌fixed"); m >= f {
			t.Errorf("%d columns: main's title on line %d, fixed's on %d: want stacked, main first", w, m, f)
		}
	}
}

// TestArmsDifferenceLineAndMergedLog: the difference line sets main's
// hanging pulls (in flight, 16.1 s p50) against fixed's; every event log
// line names its arm.
func TestArmsDifferenceLineAndMergedLog(t *testing.T) {
	out := feed(t, sceneArmsStalled(), 160, 48).View()
	want := "main: in flight 32, p50 16.1s, hits 0%  |  fixed: in flight 0, p50 0.02s, hits 0%"
	if !strings.Contains(out, want) {
		t.Errorf("no difference line %q in:\n%s", want, out)
	}
	for _, arm := range []string{"main ", "fixed"} {
		if !strings.Contains(out, "t+10.0s   "+arm+"  stall source-0 (script)") {
			t.Errorf("the event log has no stall line prefixed %q:\n%s", arm, out)
		}
	}
}

func armsProgram(t *testing.T, sc scene, w, h int) *teatest.TestModel {
	t.Helper()
	events := make(chan event.Event, len(sc.events)+16)
	for _, ev := range sc.events {
		events <- ev
	}
	m := New(sc.ctrl, sc.ctrl.tee(events), Options{
		Now: func() time.Time { return wallAt(sc.now) }, Renderer: asciiRenderer(),
		Frame: 5 * time.Millisecond, Clock: 50 * time.Millisecond,
	})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h))
	t.Cleanup(func() {
		_ = tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second))
		close(events)
	})
	return tm
}

// TestArmsKeyFiresOnEveryArmAndAOnOne: with both arms up and source-1
// healthy on both, `s` asks for a stall on every arm (one Fire, which the
// group fans out); after `a` the footer says "keys: main only" and `s`
// fires on main alone; `a` again narrows to fixed, a third time back to all.
func TestArmsKeyFiresOnEveryArmAndAOnOne(t *testing.T) {
	sc := sceneArmsStalled()
	tm := armsProgram(t, sc, 160, 48)
	waitOutput(t, tm, "keys: all arms")
	sendKey(tm, "tab") // source-1: up on both arms
	waitOutput(t, tm, "▶ source-1")
	sendKey(tm, "s")
	waitCall(t, sc.ctrl, "stall 1")

	sendKey(tm, "a")
	waitOutput(t, tm, "keys: main only")
	sendKey(tm, "s")
	waitCall(t, sc.ctrl, "main: stall 1")

	sendKey(tm, "a")
	waitOutput(t, tm, "keys: fixed only")
	sendKey(tm, "k")
	waitCall(t, sc.ctrl, "fixed: kill 1")

	sendKey(tm, "a")
	waitOutput(t, tm, "keys: all arms")
	for _, c := range sc.ctrl.Calls() {
		if strings.HasPrefix(c, "fixed: stall") || strings.HasPrefix(c, "main: kill") {
			t.Errorf("a narrowed key reached the other arm: %q", c)
		}
	}
}

// TestArmsKeyRefusedOnOneArmFiresOnNone: a stall on source-0, stalled on
// both arms, is refused by the run's check and logged per arm; nothing
// is fired.
func TestArmsKeyRefusedOnOneArmFiresOnNone(t *testing.T) {
	sc := sceneArmsStalled()
	out := pressKey(t, feed(t, sc, 160, 48), "s").View()
	for _, arm := range []string{"main ", "fixed"} {
		if !strings.Contains(out, arm+"  s: source-0 is already stalled") {
			t.Errorf("no refusal for %q in the log:\n%s", arm, out)
		}
	}
	if calls := sc.ctrl.Calls(); len(calls) != 0 {
		t.Errorf("calls %q, want none", calls)
	}
}

var _ tea.Model = Model{}

// TestArmsLogKeyOpensTheNarrowedArmsEngine: `l` opens the selected
// source's log of the first arm, or of the arm the keys are narrowed to,
// asking the controller for ARM/ENGINE; tab goes on through every arm's
// engines.
func TestArmsLogKeyOpensTheNarrowedArmsEngine(t *testing.T) {
	sc := sceneArmsStalled()
	sc.ctrl.logs["main/source-0"] = []string{"main's source-0 says hello"}
	sc.ctrl.logs["fixed/source-0"] = []string{"fixed's source-0 says hello"}
	m := feed(t, sc, 160, 48)
	press := func(m Model, k string) Model {
		next, cmd := m.Update(keyMsg(k))
		m = next.(Model)
		if cmd != nil {
			if msg := cmd(); msg != nil {
				m = update(t, m, msg)
			}
		}
		return m
	}
	m = press(m, "l")
	if out := m.View(); !strings.Contains(out, "main's source-0 says hello") {
		t.Errorf("l on all arms: want main's source-0 log:\n%s", out)
	}
	m = press(m, "esc")
	m = press(m, "a") // main only
	m = press(m, "a") // fixed only
	m = press(m, "l")
	if m.logEngine != "fixed/source-0" || !strings.Contains(m.View(), "fixed's source-0 says hello") {
		t.Errorf("l narrowed to fixed: engine %q, want fixed/source-0:\n%s", m.logEngine, m.View())
	}
	m = press(m, "tab")
	if m.logEngine != "fixed/source-1" {
		t.Errorf("tab in the log: engine %q, want fixed/source-1", m.logEngine)
	}
}

// TestSideBySideArmsLeaveAColumnBetweenThem: at 160 columns every line of
// the arms' blocks leaves the column after the first block blank, so a line
// that fills its block (the checks line, a process table with its LINK
// column) does not run into the next arm's ("✓ healt…checks (li").
func TestSideBySideArmsLeaveAColumnBetweenThem(t *testing.T) {
	for _, sc := range []func() scene{sceneArmsStalled, sceneArmsEnded} {
		lines := strings.Split(feed(t, sc(), 160, 48).View(), "\n")
		in := false
		for i, l := range lines {
			switch {
			case strings.Contains(l, "▌main"):
				in = true
			case strings.Contains(l, "last 10s  main:"): // the difference line, under the blocks
				in = false
			}
			if r := []rune(l); in && len(r) > 80 && r[79] != ' ' {
				t.Errorf("line %d runs from main's block into fixed's: %q", i, l)
			}
		}
	}
}
