package ui

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"p2pfault/event"
	"p2pfault/fault"
)

func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// press sends keys one by one and runs each command a key returns, as the
// program would, feeding their messages back.
func press(t *testing.T, m Model, keys ...string) Model {
	t.Helper()
	for _, k := range keys {
		next, cmd := m.Update(keyMsg(k))
		m = next.(Model)
		m = runCmd(t, m, cmd)
	}
	return m
}

// runCmd runs a command a key returned (never the event feed, which would
// block) and feeds its message back.
func runCmd(t *testing.T, m Model, cmd tea.Cmd) Model {
	t.Helper()
	if cmd == nil {
		return m
	}
	msg := cmd()
	if msg == nil {
		return m
	}
	return update(t, m, msg)
}

func logText(m Model) string {
	var b strings.Builder
	for _, e := range m.st.log.Last(m.st.log.Len()) {
		b.WriteString(e.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// withEvents appends events to a scene at run time t.
func withEvents(sc scene, t time.Duration, evs ...event.Event) scene {
	for _, ev := range evs {
		ev.T, ev.Wall = t, wallAt(t)
		sc.events = append(sc.events, ev)
	}
	if t > sc.now {
		sc.now = t
	}
	return sc
}

func faultEv(action string, source int) event.Event {
	return event.Event{Kind: event.KindFault, Fault: &event.FaultInfo{Action: action, Source: source, By: "key"}}
}

func condEv(c event.ConditionInfo) event.Event {
	return event.Event{Kind: event.KindCondition, Condition: &c}
}

func engineEv(source int, state event.State) event.Event {
	return engineEvPid(source, state, 4200+10*source)
}

func engineEvPid(source int, state event.State, pid int) event.Event {
	return event.Event{Kind: event.KindEngine, Engine: engineInfo(event.SourceName(source), source, state, pid, time.Second)}
}

func TestKeysCallTheControllerForTheSelectedSource(t *testing.T) {
	tests := []struct {
		name  string
		scene func() scene
		keys  []string
		want  []string
	}{
		{name: "s stalls source 0 first", scene: sceneSteady, keys: []string{"s"}, want: []string{"stall 0"}},
		{name: "tab then s stalls source 1", scene: sceneSteady, keys: []string{"tab", "s"}, want: []string{"stall 1"}},
		{name: "tab wraps back to source 0", scene: sceneSteady, keys: []string{"tab", "tab", "s"}, want: []string{"stall 0"}},
		{name: "shift+tab goes back", scene: sceneSteady, keys: []string{"shift+tab", "k"}, want: []string{"kill 1"}},
		{name: "2 selects source 1", scene: sceneSteady, keys: []string{"2", "k"}, want: []string{"kill 1"}},
		{name: "r removes", scene: sceneSteady, keys: []string{"r"}, want: []string{"remove 0"}},
		{name: "c resumes a stalled source", scene: sceneStalled, keys: []string{"c"}, want: []string{"resume 0"}},
		{name: "u restores a removed source", scene: sceneRemoved, keys: []string{"u"}, want: []string{"restore 0"}},
		{name: "p pauses then resumes probing", scene: sceneSteady, keys: []string{"p", "p"}, want: []string{"probing false", "probing true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := tt.scene()
			m := press(t, feed(t, sc, 80, 24), tt.keys...)
			if got := sc.ctrl.Calls(); !slices.Equal(got, tt.want) {
				t.Errorf("controller calls = %q, want %q\nlog:\n%s", got, tt.want, logText(m))
			}
		})
	}
}

// TestKeysThatCannotActSayWhyAndTakeNothing: a key the dashboard has
// nothing to fire on (no cluster yet, the run over, no such source) says
// so and calls nothing; a fault the kind's rule refuses on its source is
// asked of the run's one check (here the fake's) and its answer is the
// key's, in the rule's words; nothing is taken.
func TestKeysThatCannotActSayWhyAndTakeNothing(t *testing.T) {
	tests := []struct {
		name  string
		scene func() scene
		keys  []string
		why   string
	}{
		{name: "stall a removed source", scene: sceneRemoved, keys: []string{"s"}, why: "s: source-0 is removed; press u to bring it back"},
		{name: "kill a removed source", scene: sceneRemoved, keys: []string{"k"}, why: "k: source-0 is removed"},
		{name: "remove a removed source", scene: sceneRemoved, keys: []string{"r"}, why: "r: source-0 is already removed"},
		{name: "stall a stalled source", scene: sceneStalled, keys: []string{"s"}, why: "s: source-0 is already stalled; press c to resume it"},
		{name: "kill a stalled source", scene: sceneStalled, keys: []string{"k"}, why: "k: source-0 is stalled; press c to resume it"},
		{name: "resume a source that is not stalled", scene: sceneSteady, keys: []string{"c"}, why: "c: source-0 is not stalled"},
		{name: "restore a source that is not removed", scene: sceneSteady, keys: []string{"u"}, why: "u: source-0 is not removed"},
		{name: "stall a restarting source", scene: func() scene { return sceneKilled(true) }, keys: []string{"s"}, why: "s: source-0 is restarting"},
		{name: "kill a killed source", scene: func() scene { return sceneKilled(false) }, keys: []string{"k"}, why: "k: source-0 is already restarting"},
		{name: "fault before the cluster is up", scene: sceneStartup, keys: []string{"s"}, why: "s: the cluster is still starting"},
		{name: "fault after the run ended", scene: sceneFailedChecks, keys: []string{"k"}, why: "k: the run has ended"},
		{name: "pause after the run ended", scene: sceneFailedChecks, keys: []string{"p"}, why: "p: the run has ended"},
		{name: "select a source the run does not have", scene: sceneSteady, keys: []string{"5"}, why: "5: no source 4 (the run has 2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := tt.scene()
			m := press(t, feed(t, sc, 80, 24), tt.keys...)
			if calls := sc.ctrl.Calls(); len(calls) != 0 {
				t.Errorf("the controller took: %q", calls)
			}
			if log := logText(m); !strings.Contains(log, tt.why) {
				t.Errorf("event log does not say %q:\n%s", tt.why, log)
			}
		})
	}
}

func TestControllerErrorShowsInTheEventLog(t *testing.T) {
	sc := sceneSteady()
	sc.ctrl.err = errors.New("signal session 4200: operation not permitted")
	m := press(t, feed(t, sc, 80, 24), "k")
	want := "kill source-0: signal session 4200: operation not permitted"
	if log := logText(m); !strings.Contains(log, want) {
		t.Errorf("event log does not say %q:\n%s", want, log)
	}
	if !strings.Contains(m.View(), want) {
		t.Errorf("the view does not show the failed action:\n%s", m.View())
	}
}

func TestHelpKeyTogglesFullHelp(t *testing.T) {
	m := feed(t, sceneSteady(), 80, 24)
	short := m.View()
	if !strings.Contains(short, "? more") || strings.Contains(short, "close help") {
		t.Fatalf("short help expected first:\n%s", short)
	}
	m = press(t, m, "?")
	if full := m.View(); !strings.Contains(full, "close help") || !strings.Contains(full, "restore removed") {
		t.Errorf("? did not open the full help:\n%s", full)
	}
	m = press(t, m, "?")
	if again := m.View(); strings.Contains(again, "close help") {
		t.Errorf("second ? did not close the full help:\n%s", again)
	}
}

func TestLogKeyShowsTheSelectedEngineLogFullScreen(t *testing.T) {
	sc := sceneSteady()
	sc.ctrl.logs["source-1"] = []string{"INFO 12:00:01 engine core ready", "WARN 12:00:09 P2P peer 127.0.0.1:7779 \x1b[31mslow\x1b[0m"}
	sc.ctrl.logs["decoder"] = []string{"INFO decoder line"}
	m := press(t, feed(t, sc, 80, 24), "tab", "l")
	v := m.View()
	for _, want := range []string{"log: source-1", "engine core ready", "P2P peer 127.0.0.1:7779 slow", "esc back"} {
		if !strings.Contains(v, want) {
			t.Errorf("log view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "\x1b[31m") {
		t.Errorf("an engine's escape codes reached the screen: %q", v)
	}
	if v := press(t, m, "tab").View(); !strings.Contains(v, "log: decoder") || !strings.Contains(v, "decoder line") {
		t.Errorf("tab in the log view did not move to the next engine:\n%s", v)
	}
	if v := press(t, m, "esc").View(); !strings.Contains(v, "ENGINE") {
		t.Errorf("esc did not go back to the dashboard:\n%s", v)
	}
}

func TestLogViewWrapsLongLinesAndKeepsTheNewest(t *testing.T) {
	stats := "INFO 11-29 17:38:39 [loggers] Engine 000: Avg prompt throughput: 3991.0 tokens/s, Avg generation throughput: 10.0 tokens/s, " +
		"Running: 0 reqs, Waiting: 41 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%, External prefix cache hit rate: 82.8%"
	sc := sceneSteady()
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("INFO old line %d", i))
	}
	sc.ctrl.logs["source-0"] = append(lines, stats, "INFO newest")
	v := press(t, feed(t, sc, 80, 24), "l").View()
	rows := strings.Split(v, "\n")
	if len(rows) != 24 {
		t.Fatalf("log view is %d rows, want 24", len(rows))
	}
	for i, r := range rows {
		if w := lipgloss.Width(r); w > 80 {
			t.Errorf("row %d is %d cells wide: %q", i, w, r)
		}
	}
	flat := strings.Join(strings.Fields(v), " ")
	for _, want := range []string{"Waiting: 41 reqs", "External prefix cache hit rate: 82.8%", "INFO newest", "INFO old line 39"} {
		if !strings.Contains(flat, want) {
			t.Errorf("log view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "…") {
		t.Errorf("a log line was truncated:\n%s", v)
	}
	if strings.Contains(v, "old line 0\n") || strings.Contains(v, "INFO old line 1 ") {
		t.Errorf("the oldest lines should have scrolled away:\n%s", v)
	}
}

func TestQuitKeysEndTheProgram(t *testing.T) {
	for _, k := range []string{"q", "ctrl+c"} {
		t.Run(k, func(t *testing.T) {
			next, cmd := feed(t, sceneSteady(), 80, 24).Update(keyMsg(k))
			if cmd == nil {
				t.Fatal("no command")
			}
			if _, ok := cmd().(tea.QuitMsg); !ok {
				t.Errorf("%s did not quit", k)
			}
			if next.(Model).View() != "" {
				t.Errorf("a quitting dashboard should leave the screen clean")
			}
		})
	}
}

// The badge is what the condition events say (the experiment computes
// them: experiment/condition_test.go), a stall's counting down to its end.
func TestBadgeShowsTheConditionTheExperimentSent(t *testing.T) {
	base := sceneSteady
	at := 9 * time.Second
	cond := func(c event.Condition, fault, label string, until time.Duration) event.Event {
		return event.Event{Kind: event.KindCondition, Condition: &event.ConditionInfo{Source: 0, Condition: c, Fault: fault, Label: label, Until: until}}
	}
	tests := []struct {
		name string
		evs  []event.Event
		now  time.Duration
		want string
	}{
		{name: "ready", want: "READY"},
		{name: "stall counts down to its end", evs: []event.Event{cond(event.CondStalled, fault.ActionStall, "STALLED", at+30*time.Second)},
			now: at + 12*time.Second, want: "STALLED 18s"},
		{name: "stall below ten seconds shows tenths", evs: []event.Event{cond(event.CondStalled, fault.ActionStall, "STALLED", at+30*time.Second)},
			now: at + 25500*time.Millisecond, want: "STALLED 4.5s"},
		{name: "a stall until resumed has no countdown", evs: []event.Event{cond(event.CondStalled, fault.ActionStall, "STALLED", 0)}, want: "STALLED"},
		{name: "the kind's own word", evs: []event.Event{cond(event.CondRestarting, fault.ActionKill, "KILLED", 0)}, want: "KILLED"},
		{name: "the latest condition wins", evs: []event.Event{cond(event.CondRestarting, fault.ActionKill, "KILLED", 0), cond(event.CondRestarting, fault.ActionKill, "RESTARTING", 0)}, want: "RESTARTING"},
		{name: "a crash", evs: []event.Event{cond(event.CondExited, "", "EXITED code 1", 0)}, want: "EXITED code 1"},
		{name: "a fault event alone changes nothing", evs: []event.Event{{Kind: event.KindFault, Fault: &event.FaultInfo{Action: fault.ActionStall, Source: 0, Duration: 30 * time.Second}}}, want: "READY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := withEvents(base(), at, tt.evs...)
			if tt.now > 0 {
				sc.now = tt.now
			}
			m := feed(t, sc, 80, 24)
			_, got := m.st.badge(0, m.nowT())
			if got != tt.want {
				t.Errorf("badge = %q, want %q", got, tt.want)
			}
			if !strings.Contains(m.View(), tt.want) {
				t.Errorf("view does not show %q", tt.want)
			}
		})
	}
	// A source no condition event named yet is waiting.
	var s script
	s.run(runInfo("none", 2, 1))
	m := feed(t, scene{events: s.events, ctrl: newFakeCtrl()}, 80, 24)
	if _, got := m.st.badge(0, m.nowT()); got != "WAITING" {
		t.Errorf("badge before any condition = %q, want WAITING", got)
	}
}

func TestHeaderCountsDownToTheScriptedFault(t *testing.T) {
	tests := []struct {
		name string
		now  time.Duration
		info *event.RunInfo
		want string
	}{
		{name: "before the fault", now: 6500 * time.Millisecond, info: runInfo("stall", 2, 1), want: "stall source-0 in 3.5s"},
		{name: "compressed time", now: 200 * time.Millisecond, info: runInfo("kill", 2, 0.05), want: "kill source-0 in 0.3s"},
		{name: "after the fault: end of run", now: 25 * time.Second, info: runInfo("remove", 2, 1), want: "ends in 35s"},
		{name: "no scripted fault", now: 5 * time.Second, info: func() *event.RunInfo {
			i := runInfo("none", 2, 1)
			i.FaultAt, i.Duration = 0, 0
			return i
		}(), want: "no scripted fault"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s script
			s.run(tt.info)
			s.upCluster(2)
			m := feed(t, scene{events: s.events, now: tt.now, ctrl: newFakeCtrl()}, 160, 48)
			if v := m.View(); !strings.Contains(v, tt.want) {
				t.Errorf("header does not say %q:\n%s", tt.want, strings.Join(strings.Split(v, "\n")[:2], "\n"))
			}
		})
	}
}

func TestStartupFailureShowsTheMessageAndLastLogLines(t *testing.T) {
	sc := sceneStartupFailed()
	m := feed(t, sc, 80, 24)
	// Before LogTail answers, the view already says what went wrong.
	v := m.View()
	for _, want := range []string{"the cluster did not come up", "port in use by pid 999", "press q to quit"} {
		if !strings.Contains(v, want) {
			t.Errorf("failure view lacks %q:\n%s", want, v)
		}
	}
	// The feed asked for the logs of the engines that did not come up,
	// after the run gave up.
	if m.tailsStage != 2 {
		t.Fatalf("failed engines' logs fetched at stage %d, want 2 (run ended)", m.tailsStage)
	}
	if got := m.failedEngines(); !slices.Equal(got, []string{"source-1", "decoder"}) {
		t.Errorf("failed engines = %q, want source-1 and decoder", got)
	}
	m = update(t, m, fetchFailTails(sc.ctrl, m.failedEngines(), 12)())
	if v := m.View(); !strings.Contains(v, "[Errno 98] error while attempting to bind") {
		t.Errorf("failure view lacks the engine's last log lines:\n%s", v)
	}
}

func TestEventStreamClosingEndsTheRun(t *testing.T) {
	sc := sceneSteady()
	m := feed(t, sc, 80, 24)
	m = update(t, m, eventsMsg{closed: true})
	if !m.st.ended {
		t.Fatal("a closed stream did not end the run")
	}
	if v := m.View(); !strings.Contains(v, "press q to quit") {
		t.Errorf("view does not tell the run is over:\n%s", v)
	}
}

func TestViewFitsAnyWindowAndRedrawsOnResize(t *testing.T) {
	m := feed(t, sceneStalled(), 80, 24)
	for _, size := range []struct{ w, h int }{{80, 24}, {100, 30}, {60, 20}, {200, 60}, {20, 5}} {
		m = update(t, m, tea.WindowSizeMsg{Width: size.w, Height: size.h})
		out := m.View()
		assertFits(t, out, size.w, size.h)
		if size.w >= 80 && len(strings.Split(out, "\n")) != size.h {
			t.Errorf("%dx%d: view is %d lines, want the whole window", size.w, size.h, len(strings.Split(out, "\n")))
		}
	}
}

func TestNoColorPinsAnASCIIProfile(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	if p := terminalRenderer().ColorProfile(); p != termenv.Ascii {
		t.Errorf("NO_COLOR: profile %v, want Ascii", p)
	}
	sc := sceneStalled()
	colour := lipgloss.NewRenderer(nil)
	colour.SetColorProfile(termenv.ANSI256)
	m := New(sc.ctrl, nil, Options{Now: func() time.Time { return wallAt(sc.now) }, Renderer: colour})
	m = update(t, m, eventsMsg{events: sc.events})
	if !strings.Contains(m.View(), "\x1b[") {
		t.Fatal("a colour profile drew no colour; the ASCII check below would prove nothing")
	}
	if v := feed(t, sc, 80, 24).View(); strings.Contains(v, "\x1b[") {
		t.Errorf("ASCII profile drew escape codes")
	}
}

func TestMalformedEventsNeverPanic(t *testing.T) {
	evs := []event.Event{
		{Kind: event.KindRun},
		{Kind: event.KindEngine},
		{Kind: event.KindEngine, Engine: &event.EngineInfo{}},
		{Kind: event.KindLog},
		{Kind: event.KindFault},
		{Kind: event.KindFault, Fault: &event.FaultInfo{Action: "stall", Source: -3}},
		{Kind: event.KindFault, Fault: &event.FaultInfo{Action: "stall", Source: 1 << 30}},
		{Kind: event.KindWindow},
		{Kind: event.KindWindow, Window: &event.Window{Source: -1}},
		{Kind: event.KindSamples, Samples: []event.Sample{{Source: -1}, {Source: 1 << 20}, {Source: 0, Latency: -time.Second}}},
		{Kind: event.KindVerdict},
		{Kind: "no-such-kind"},
		{Kind: event.KindLog, Log: &event.LogLine{Engine: "decoder", Line: "\x1b[2J\x1b[Hcleared\tscreen\r"}},
		{Kind: event.KindEnd, ExitCode: 3},
	}
	m := New(newFakeCtrl(), nil, Options{Now: func() time.Time { return wallAt(0) }, Renderer: asciiRenderer()})
	m = update(t, m, eventsMsg{events: evs})
	m = press(t, m, "s", "tab", "1", "l", "esc", "?")
	out := m.View()
	assertFits(t, out, 80, 24)
	log := logText(m)
	if !strings.Contains(log, "out of range") {
		t.Errorf("bad source indexes were not reported:\n%s", log)
	}
	if strings.Contains(log, "\x1b") || !strings.Contains(log, "cleared screen") {
		t.Errorf("an engine's control codes were not cleaned: %q", log)
	}
}

func TestWarningBeforeReadyShowsTroubleUntilTheClusterIsUp(t *testing.T) {
	sc := withEvents(sceneStartup(), -15*time.Second,
		event.Event{Kind: event.KindWarning, Message: "source-1 slow to answer /health (5s)"},
		event.Event{Kind: event.KindLog, Log: &event.LogLine{Engine: "source-1", Line: "loading model weights"}},
	)
	m := feed(t, sc, 80, 24)
	v := m.View()
	for _, want := range []string{"trouble while starting", "source-1 slow to answer /health (5s)", "starting engines"} {
		if !strings.Contains(v, want) {
			t.Errorf("start-up view lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "did not come up") {
		t.Errorf("a warning is not a failed start while the run goes on:\n%s", v)
	}
	if m.tailsStage != 1 {
		t.Errorf("logs of the engines not up were not asked for on the warning (stage %d)", m.tailsStage)
	}
	up := withEvents(sc, -14*time.Second,
		engineEv(1, event.StateReady),
		event.Event{Kind: event.KindEngine, Engine: engineInfo("decoder", 0, event.StateReady, 4300, time.Second)},
		event.Event{Kind: event.KindPhase, Phase: event.PhaseWarmup},
	)
	if v := feed(t, up, 80, 24).View(); !strings.Contains(v, "ENGINE") || !strings.Contains(v, "phase WARM-UP") {
		t.Errorf("the dashboard did not open once the cluster was up:\n%s", v)
	}
}

func TestWindowsFollowTheRunsTimeScale(t *testing.T) {
	tests := []struct {
		name                 string
		opts                 Options
		scale                float64
		window, recent, join time.Duration
	}{
		{name: "real time", scale: 1, window: time.Minute, recent: 10 * time.Second, join: 1500 * time.Millisecond},
		{name: "compressed 20x", scale: 0.05, window: 3 * time.Second, recent: 500 * time.Millisecond, join: 75 * time.Millisecond},
		{name: "options win", scale: 0.05, opts: Options{Window: 10 * time.Second, Recent: 2 * time.Second},
			window: 10 * time.Second, recent: 2 * time.Second, join: 75 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s script
			s.run(runInfo("stall", 2, tt.scale))
			opts := tt.opts
			opts.Renderer = asciiRenderer()
			m := update(t, New(newFakeCtrl(), nil, opts), eventsMsg{events: s.events})
			got := []time.Duration{m.window(), m.recent(), m.bridge()}
			want := []time.Duration{tt.window, tt.recent, tt.join}
			if !slices.Equal(got, want) {
				t.Errorf("window, recent, bridge = %v, want %v", got, want)
			}
		})
	}
}

func TestRunRefusesMissingInputs(t *testing.T) {
	ch := make(chan event.Event)
	tests := []struct {
		name   string
		ctrl   Controller
		events <-chan event.Event
		want   string
	}{
		{name: "no controller", events: ch, want: "dashboard: no experiment controller"},
		{name: "no events", ctrl: newFakeCtrl(), want: "dashboard: no event channel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Run(t.Context(), tt.ctrl, tt.events, Options{})
			if err == nil || err.Error() != tt.want {
				t.Errorf("Run = %v, want %q", err, tt.want)
			}
		})
	}
}

// A nemesis run's header counts down to its schedule's next fault, step
// after step, as it does to a scripted one, and to the end after the last.
func TestHeaderCountsDownToTheNemesisNextFault(t *testing.T) {
	sched := &event.ScheduleInfo{Nemesis: fault.NemesisRandom, Seed: 7, Timeline: "at 10s kill source-1; at 50s stall source-0 for 20s", Steps: []event.ScheduledFault{
		{At: 10 * time.Second, Action: fault.ActionKill, Source: 1},
		{At: 50 * time.Second, Action: fault.ActionStall, Source: 0, For: 20 * time.Second},
	}}
	tests := []struct {
		now  time.Duration
		want string
	}{
		{7 * time.Second, "kill source-1 in 3.0s"},
		{38 * time.Second, "stall source-0 in 12s"},
		{75 * time.Second, "ends in 45s"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			info := runInfo(fault.CaseNemesis, 2, 1)
			info.Nemesis, info.Timeline, info.Duration = fault.NemesisRandom, sched.Timeline, 2*time.Minute
			var s script
			s.run(info)
			s.add(-warmup, event.Event{Kind: event.KindSchedule, Schedule: sched})
			s.upCluster(2)
			m := feed(t, scene{events: s.events, now: tt.now, ctrl: newFakeCtrl()}, 160, 48)
			if v := m.View(); !strings.Contains(v, tt.want) {
				t.Errorf("header does not say %q:\n%s", tt.want, strings.Join(strings.Split(v, "\n")[:2], "\n"))
			}
		})
	}
}

// The header counts down to the schedule the run's schedule event gives,
// not to the run's timeline text (parsed once by the experiment, which
// sends the schedule before playing it); a stream with no schedule event
// has no scripted fault to count down to.
func TestHeaderReadsTheScheduleEvent(t *testing.T) {
	sched := &event.ScheduleInfo{Timeline: "at 12s remove source-1", Steps: []event.ScheduledFault{
		{At: 12 * time.Second, Action: fault.ActionRemove, Source: 1},
	}}
	tests := []struct {
		name  string
		sched *event.ScheduleInfo // nil: no schedule event at all
		now   time.Duration
		want  string
	}{
		{"before t0 it names the schedule's first step and its time", sched, -15 * time.Second, "remove source-1 at t+12.0s"},
		{"after t0 it counts down to it", sched, 6 * time.Second, "remove source-1 in 6.0s"},
		{"once it fired, to the end", sched, 13 * time.Second, "ends in 47s"},
		{"without a schedule event, no scripted fault", nil, -15 * time.Second, "no scripted fault"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The run's text names another fault than the schedule: the
			// header must follow the schedule.
			info := runInfo("stall", 2, 1)
			info.Timeline = "at 10s kill source-0"
			var s script
			s.add(-warmup, event.Event{Kind: event.KindRun, Run: info})
			if tt.sched != nil {
				s.add(-warmup, event.Event{Kind: event.KindSchedule, Schedule: tt.sched})
			}
			s.add(-warmup, event.Event{Kind: event.KindPhase, Phase: event.PhaseStarting})
			if tt.now >= 0 {
				s.upCluster(2)
			}
			m := feed(t, scene{events: s.events, now: tt.now, ctrl: newFakeCtrl()}, 160, 48)
			if got := m.nextFault(m.nowT()); got != tt.want {
				t.Errorf("header countdown = %q, want %q", got, tt.want)
			}
			if v := m.View(); m.st.up() && !strings.Contains(v, tt.want) {
				t.Errorf("header does not say %q:\n%s", tt.want, strings.Join(strings.Split(v, "\n")[:2], "\n"))
			}
		})
	}
}

// TestRankPickerTargetsOneRank: on a run whose source-0 has two
// data-parallel ranks, d moves the keys' target from the whole engine to
// rank 0, rank 1 and back; the header names it; a fault key fires on that
// grain; selecting another source goes back to its whole engine; a source
// of one rank says it has none.
func TestRankPickerTargetsOneRank(t *testing.T) {
	sc := sceneSteady()
	for i := range sc.events {
		if r := sc.events[i].Run; r != nil {
			c := *r
			c.SourceRanks = []int{2, 1}
			sc.events[i].Run = &c
		}
	}
	m := feed(t, sc, 100, 24)
	if v := m.View(); !strings.Contains(v, "target source-0") || strings.Contains(v, "target source-0/rank") {
		t.Fatalf("before d the header should target the whole engine:\n%s", v)
	}
	m = press(t, m, "d", "d")
	if v := m.View(); !strings.Contains(v, "target source-0/rank1") {
		t.Errorf("after d d the header should target source-0/rank1:\n%s", v)
	}
	m = press(t, m, "s", "d", "k", "tab", "d", "r")
	want := []string{"stall 0/rank1", "kill 0", "remove 1"}
	if got := sc.ctrl.Calls(); !slices.Equal(got, want) {
		t.Errorf("controller calls = %q, want %q\nlog:\n%s", got, want, logText(m))
	}
	if !strings.Contains(logText(m), "d: source-1 has one engine core") {
		t.Errorf("g on a source of one rank should say so:\n%s", logText(m))
	}
}

// TestSourcePanelBreaksItsStatsDownByRank: a source of two ranks whose
// rank 1 misses slowly shows each rank's p50 and hit rate on its panel; a
// source of one rank shows no rank line.
func TestSourcePanelBreaksItsStatsDownByRank(t *testing.T) {
	sc := sceneSteady()
	for i := range sc.events {
		ev := &sc.events[i]
		if r := ev.Run; r != nil {
			c := *r
			c.SourceRanks = []int{2, 1}
			ev.Run = &c
		}
		if ev.Kind != event.KindSamples {
			continue
		}
		ss := slices.Clone(ev.Samples)
		for j := range ss {
			if ss[j].Source == 0 && ss[j].Trial%4 >= 2 {
				ss[j].Rank, ss[j].CachedTokens, ss[j].Latency = 1, 0, 3*time.Second
			}
		}
		ev.Samples = ss
	}
	m := feed(t, sc, 160, 48)
	v := m.View()
	if !strings.Contains(v, "rank0 p50") || !strings.Contains(v, "hits 100%") || !strings.Contains(v, "rank1 p50 3.00s") || !strings.Contains(v, "hits 0%") {
		t.Errorf("source-0's panel should break down by rank:\n%s", v)
	}
	if strings.Count(v, "rank0 p50") != 1 {
		t.Errorf("only source-0 has ranks:\n%s", v)
	}
}

// TestRankStallBadgesThatRankOnly: a stall of source-0/rank1 (the
// condition names the rank) shows on source-0's badge as rank1's and on
// rank1's line only; rank0's line and source-1 carry none, and the resume
// takes it off both.
func TestRankStallBadgesThatRankOnly(t *testing.T) {
	sc := sceneSteady()
	for i := range sc.events {
		if r := sc.events[i].Run; r != nil {
			c := *r
			c.SourceRanks = []int{2, 2}
			sc.events[i].Run = &c
		}
	}
	stalled := condEv(event.ConditionInfo{Source: 0, Condition: event.CondStalled, Fault: fault.ActionStall,
		Label: "STALLED", Target: "source-0/rank1", Until: 30 * time.Second})
	sc.events = append(sc.events, stalled)
	v := feed(t, sc, 160, 48).View()
	if !strings.Contains(v, "source-0  rank1 STALLED 30s") {
		t.Errorf("source-0's badge should name rank1:\n%s", v)
	}
	if strings.Count(v, "rank1 STALLED") != 2 || !strings.Contains(v, "rank0 no pulls  rank1 STALLED 30s no pulls") {
		t.Errorf("the badge should be on the title and on rank1's line, nowhere else:\n%s", v)
	}
	if strings.Contains(v, "rank0 STALLED") || strings.Contains(v, "source-1  STALLED") {
		t.Errorf("rank0 and source-1 run on:\n%s", v)
	}

	sc.events = append(sc.events, condEv(event.ConditionInfo{Source: 0, Condition: event.CondUp, Label: "READY"}))
	v = feed(t, sc, 160, 48).View()
	if strings.Contains(v, "STALLED") || !strings.Contains(v, "source-0  READY") {
		t.Errorf("after the resume no badge should say STALLED:\n%s", v)
	}
}
