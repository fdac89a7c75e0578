package ui

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/report"
)

// writeEvents writes evs to an events.jsonl as a run does (report's
// EventLog) and returns its path.
func writeEvents(t testing.TB, evs []event.Event) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), report.FileEvents)
	log, err := report.NewEventLogWith(path, report.CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if err := log.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// fromFile is the replay of the events file at path, read as `p2pfault
// replay` reads it (report's reader), w×h, paused at its start.
func fromFile(t testing.TB, path string, w, h int) *Replay {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, truncated, err := report.ReadEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReplay(ReplayConfig{Name: path, Events: evs, Truncated: truncated}, Options{Renderer: asciiRenderer()})
	r.Update(tea.WindowSizeMsg{Width: w, Height: h})
	r.Update(keyMsg(" "))
	return r
}

// liveFrame is the live dashboard's frame at run time at, w×h: the events
// sent by then come through the live feed (a channel, waitEvents), and
// the clock is pinned at that instant.
func liveFrame(t testing.TB, evs []event.Event, at time.Duration, w, h int) string {
	t.Helper()
	ch := make(chan event.Event, len(evs))
	for _, ev := range evs {
		if !ev.Wall.After(wallAt(at)) {
			ch <- ev
		}
	}
	m := New(newFakeCtrl(), ch, Options{Now: func() time.Time { return wallAt(at) }, Renderer: asciiRenderer()})
	m = update(t, m, tea.WindowSizeMsg{Width: w, Height: h})
	for len(ch) > 0 {
		m = update(t, m, waitEvents(ch, nil, 0)())
	}
	return m.View()
}

var elapsedRe = regexp.MustCompile(`elapsed \d\d:\d\d`)

// assertSameFrame checks the replay's frame is the live one: every line
// the same but the footer (the replay's keys) and, in the header, the
// replay's mark and position where the live one has its elapsed time,
// which must be the position.
func assertSameFrame(t *testing.T, live, replay, tag string) {
	t.Helper()
	ll, rl := strings.Split(live, "\n"), strings.Split(replay, "\n")
	if len(ll) != len(rl) {
		t.Fatalf("replay frame has %d lines, live %d\nreplay:\n%s\nlive:\n%s", len(rl), len(ll), replay, live)
	}
	tagged := 0
	for i := 0; i < len(ll)-1; i++ {
		if ll[i] == rl[i] {
			continue
		}
		if !strings.Contains(rl[i], tag) {
			t.Errorf("line %d differs:\nreplay: %q\nlive:   %q", i+1, rl[i], ll[i])
			continue
		}
		tagged++
		rf := strings.Fields(strings.Replace(rl[i], tag, "", 1))
		lf := strings.Fields(elapsedRe.ReplaceAllString(ll[i], ""))
		if strings.Join(rf, " ") != strings.Join(lf, " ") {
			t.Errorf("header line %d differs beyond the replay's mark:\nreplay: %q\nlive:   %q", i+1, rl[i], ll[i])
		}
		if e := elapsedRe.FindString(ll[i]); e != "" && !strings.Contains(tag, " "+strings.TrimPrefix(e, "elapsed ")+"/") {
			t.Errorf("the replay's position %q is not the live %q", tag, e)
		}
	}
	if tagged != 1 {
		t.Errorf("the replay's mark %q is on %d lines, want 1:\n%s", tag, tagged, replay)
	}
	if !strings.Contains(rl[len(rl)-1], "space pause") {
		t.Errorf("the replay's footer is not its keys: %q", rl[len(rl)-1])
	}
}

// stallRun is a whole one-arm stall run: source-0 stalled from 10 s to
// 40 s, its pulls hanging (sent, not ended) until they end on the
// handshake deadline, then recovery and the verdict at 65 s.
func stallRun() []event.Event {
	return merge(map[string]*script{"main": armScript("main", 0, true)}, "main")
}

// armsRun is the same run on two arms, main and fixed, merged.
func armsRun() []event.Event {
	return merge(map[string]*script{"main": armScript("main", 0, true), "fixed": armScript("fixed", 0, true)}, "main", "fixed")
}

// TestReplayRendersTheFrameTheLiveFeedRendered: the dashboard fed from
// the events file, at an instant, is the frame the live dashboard drew at
// that instant (goldens of the replay's frames), one arm and several,
// reached going forward and going back.
func TestReplayRendersTheFrameTheLiveFeedRendered(t *testing.T) {
	const w, h = 140, 45
	tests := []struct {
		name string
		run  func() []event.Event
		at   time.Duration
	}{
		{"startup", stallRun, -17 * time.Second},
		{"baseline", stallRun, 5 * time.Second},
		{"fault_in_flight", stallRun, 15 * time.Second},
		{"fault_no_pulls_ended", stallRun, 22 * time.Second},
		{"recovery", stallRun, 45 * time.Second},
		{"ended", stallRun, 66 * time.Second},
		{"arms_fault", armsRun, 15 * time.Second},
		{"arms_ended", armsRun, 66 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := tt.run()
			path := writeEvents(t, evs)
			live := liveFrame(t, evs, tt.at, w, h)

			r := fromFile(t, path, w, h)
			r.seek(wallAt(tt.at))
			forward := r.View()
			assertFits(t, forward, w, h)
			assertSameFrame(t, live, forward, r.tag())
			golden.RequireEqual(t, []byte(forward))

			// Back from the end: the Model is rebuilt from the first event.
			r.Update(keyMsg("G"))
			r.seek(wallAt(tt.at))
			if back := r.View(); back != forward {
				t.Errorf("going back to t%+v drew another frame:\n%s\nforward:\n%s", tt.at, back, forward)
			}
		})
	}
}

// TestReplayClockIsThePosition: ages, countdowns and rolling windows run
// on the replay's position, not on the wall clock: paused they stand
// still however long the real time runs, and at ×2 a real second moves
// them two.
func TestReplayClockIsThePosition(t *testing.T) {
	r := fromFile(t, writeEvents(t, stallRun()), 140, 45)
	r.seek(wallAt(15 * time.Second))
	real0 := time.Now()
	r.Update(replayTickMsg{at: real0})
	want := func(what string, v string) {
		t.Helper()
		if !strings.Contains(r.View(), v) {
			t.Errorf("%s: no %q in\n%s", what, v, r.View())
		}
	}
	want("paused at t+15s", "in flight 11, oldest 5.0s")
	want("paused at t+15s", "STALLED 25s")
	r.Update(replayTickMsg{at: real0.Add(time.Second)})
	r.Update(replayTickMsg{at: real0.Add(2 * time.Second)})
	want("paused, 2 s of real time later", "in flight 11, oldest 5.0s")

	r.Update(keyMsg(" "))
	r.Update(keyMsg("]"))
	r.Update(replayTickMsg{at: real0.Add(2500 * time.Millisecond)})
	r.Update(replayTickMsg{at: real0.Add(3 * time.Second)})
	// 1 s of real time at ×2: t+17s; source-0's pulls started every
	// 0.5 s from 10 s still hang, none ended in the last 10 s.
	want("×2 for 1 s", "in flight 15, oldest 7.0s")
	want("×2 for 1 s", "STALLED 23s")
	r.seek(wallAt(21 * time.Second))
	want("at t+21s", "no pulls in the last 10s")
}

// press sends keys to the replay one by one.
func (r *Replay) press(keys ...string) {
	for _, k := range keys {
		r.Update(replayKey(k))
	}
}

func replayKey(k string) tea.KeyMsg {
	switch k {
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "shift+left":
		return tea.KeyMsg{Type: tea.KeyShiftLeft}
	case "shift+right":
		return tea.KeyMsg{Type: tea.KeyShiftRight}
	case " ":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune(" ")}
	}
	return keyMsg(k)
}

// TestReplayKeys: each key moves the position or the speed as the help
// says, from a replay paused at t+20s.
func TestReplayKeys(t *testing.T) {
	path := writeEvents(t, stallRun())
	tests := []struct {
		name  string
		keys  []string
		pos   time.Duration // run time of the position after the keys
		speed float64
	}{
		{"right steps 1s on", []string{"right"}, 21 * time.Second, 1},
		{"left steps 1s back", []string{"left"}, 19 * time.Second, 1},
		{"shift+right steps 10s on", []string{"shift+right"}, 30 * time.Second, 1},
		{"shift+left steps 10s back", []string{"shift+left"}, 10 * time.Second, 1},
		{"] doubles twice", []string{"]", "]"}, 20 * time.Second, 4},
		{"keys typed fast come as one message", []string{"]]"}, 20 * time.Second, 4},
		{"[ halves down to ×0.25", []string{"[", "[", "[", "["}, 20 * time.Second, 0.25},
		{"] doubles up to ×64", []string{"]", "]", "]", "]", "]", "]", "]", "]"}, 20 * time.Second, 64},
		{"g goes to the start", []string{"g"}, -20 * time.Second, 1},
		{"G goes to the end", []string{"G"}, 65 * time.Second, 1},
		{"f from the start lands in the fault window", []string{"g", "f"}, 10*time.Second + markSettle, 1},
		{"F goes back to the window from past it", []string{"F"}, 10*time.Second + markSettle, 1},
		{"f past the last window stays", []string{"f"}, 20 * time.Second, 1},
		{"steps stop at the end", []string{"G", "right"}, 65 * time.Second, 1},
		{"steps stop at the start", []string{"g", "shift+left"}, -20 * time.Second, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fromFile(t, path, 140, 45)
			r.seek(wallAt(20 * time.Second))
			r.press(tt.keys...)
			if got := r.now().Sub(wallAt(0)); got != tt.pos {
				t.Errorf("position t%+v, want t%+v", got, tt.pos)
			}
			if r.speed != tt.speed {
				t.Errorf("speed ×%v, want ×%v", r.speed, tt.speed)
			}
			if !r.paused {
				t.Error("the keys unpaused the replay")
			}
		})
	}
}

// TestReplaySpacePausesAndPlays: playing, a tick moves the position by
// the real time elapsed; paused it does not.
func TestReplaySpacePausesAndPlays(t *testing.T) {
	r := fromFile(t, writeEvents(t, stallRun()), 140, 45) // paused
	r.seek(wallAt(5 * time.Second))
	real0 := time.Now()
	tick := func(d time.Duration) { r.Update(replayTickMsg{at: real0.Add(d)}) }
	tick(0)
	tick(time.Second)
	if got := r.now().Sub(wallAt(0)); got != 5*time.Second {
		t.Fatalf("paused: position t%+v after a tick, want t+5s", got)
	}
	if !strings.Contains(r.View(), "REPLAY ×1 paused 00:25/01:25") {
		t.Errorf("paused header:\n%s", r.View())
	}
	r.press(" ")
	tick(1500 * time.Millisecond)
	tick(2 * time.Second)
	if got := r.now().Sub(wallAt(0)); got != 6*time.Second {
		t.Errorf("playing: position t%+v after 1 s, want t+6s", got)
	}
	if !strings.Contains(r.View(), "REPLAY ×1 ▶ 00:26/01:25") {
		t.Errorf("playing header:\n%s", r.View())
	}
	r.press("G")
	if !strings.Contains(r.View(), "REPLAY ×1 end 01:25/01:25") {
		t.Errorf("end header:\n%s", r.View())
	}
}

// TestReplayRefusesFaultKeys: every fault key, p and (several arms) a say
// why in the event log and fire nothing.
func TestReplayRefusesFaultKeys(t *testing.T) {
	r := fromFile(t, writeEvents(t, armsRun()), 140, 45)
	r.seek(wallAt(20 * time.Second))
	keys := []string{"p", "a"}
	for _, f := range DefaultKeyMap().Faults {
		keys = append(keys, f.Keys()...)
	}
	for _, k := range keys {
		_, cmd := r.Update(replayKey(k))
		if cmd != nil {
			if msg := cmd(); msg != nil {
				t.Errorf("%s: the key ran a command: %#v", k, msg)
			}
		}
	}
	var log []string
	for _, e := range r.m.st.log.Last(50) {
		log = append(log, e.text)
	}
	text := strings.Join(log, "\n")
	for _, k := range keys {
		want := k + ": replay: faults are not fired in a replay"
		if k == "p" {
			want = "p: replay: the probe is not paused in a replay"
		}
		if !strings.Contains(text, want) {
			t.Errorf("no %q in the event log:\n%s", want, text)
		}
	}
	if err := (replayCtrl{pos: r.pos}).Fire(fault.Action{Kind: stallKind(t), Source: 0}); err != ErrReplayFault {
		t.Errorf("the replay's controller fired: %v", err)
	}
}

// TestReplayJumpsBetweenFaultWindows: a timeline of three faults; f goes
// through them in order, F back, and past the last f says so.
func TestReplayJumpsBetweenFaultWindows(t *testing.T) {
	var s script
	info := runInfo("none", 2, 1)
	info.Timeline = "at 5s stall source-0 for 5s; at 20s kill source-1; at 40s stall source-1 for 5s"
	s.run(info)
	s.upCluster(2)
	s.samples(2, 0, 5*time.Second, 500*time.Millisecond, healthy)
	for _, w := range []struct {
		src        int
		start, end time.Duration
	}{{0, 5 * time.Second, 10 * time.Second}, {1, 20 * time.Second, 21 * time.Second}, {1, 40 * time.Second, 45 * time.Second}} {
		s.window(w.start, event.Window{Source: w.src, Start: w.start, Recovers: true})
		s.samples(2, w.start, w.end, 500*time.Millisecond, healthy)
		s.window(w.end, event.Window{Source: w.src, Start: w.start, End: w.end, Recovers: true})
	}
	s.samples(2, 45*time.Second, 50*time.Second, 500*time.Millisecond, healthy)
	r := fromFile(t, writeEvents(t, merge(map[string]*script{"main": &s}, "main")), 140, 45)
	at := func() time.Duration { return r.now().Sub(wallAt(0)) }
	var got []time.Duration
	for range 3 {
		r.press("f")
		got = append(got, at())
	}
	r.press("f")
	got = append(got, at())
	if v := r.View(); !strings.Contains(v, "f: no fault window after t+40.0s") {
		t.Errorf("f past the last window did not say so:\n%s", v)
	}
	r.press("F", "F")
	got = append(got, at())
	want := []time.Duration{5 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second, 5 * time.Second}
	for i := range want {
		want[i] += markSettle
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("f f f f F F stopped at %v, want %v", got, want)
	}
}

// TestReplayFollowsARunStillWriting: with Follow the replay starts at the
// live edge, its clock runs with the run's between events, it takes in
// what the file gains, stops at most followSlack past the last event of a
// run that writes no more, and stops following at the run's end.
func TestReplayFollowsARunStillWriting(t *testing.T) {
	evs := stallRun()
	path := filepath.Join(t.TempDir(), report.FileEvents)
	log, err := report.NewEventLogWith(path, report.CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	written := 0
	writeTo := func(at time.Duration) {
		for ; written < len(evs) && !evs[written].Wall.After(wallAt(at)); written++ {
			if err := log.Write(evs[written]); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeTo(15 * time.Second)
	// As the CLI opens a followed file: read what is there, then tail it.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := report.ReadEvents(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	tail, err := report.OpenTail(path, len(first))
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	r := NewReplay(ReplayConfig{Name: path, Events: first, Follow: tail.Next, FromEnd: true}, Options{Renderer: asciiRenderer()})
	r.Update(tea.WindowSizeMsg{Width: 140, Height: 45})
	// The ticks carry the run's real time: the test plays the run's clock.
	tickAt := func(at time.Duration) { r.Update(replayTickMsg{at: wallAt(at)}) }
	// poll polls the file until the replay holds every event written (the
	// tail reads in a goroutine of its own).
	poll := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r.Update(r.poll(0)())
			if len(r.events) == written || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if len(r.events) != written {
			t.Fatalf("the replay holds %d events of the %d written", len(r.events), written)
		}
	}
	want := func(what, text string) {
		t.Helper()
		if v := r.View(); !strings.Contains(v, text) {
			t.Errorf("%s: no %q in\n%s", what, text, v)
		}
	}
	// The first tick comes 0.6 s after the last event: the replay goes to
	// the live edge, not 0.6 s behind it.
	tickAt(15600 * time.Millisecond)
	want("at the live edge", "REPLAY ×1 ▶ 00:35/00:35 following")
	want("at the live edge", "in flight 11, oldest 5.6s")
	tickAt(16600 * time.Millisecond)
	want("a second later, no event yet", "in flight 11, oldest 6.6s")

	writeTo(30 * time.Second)
	poll()
	tickAt(30 * time.Second) // on the edge it stays there
	want("after the file grew", "REPLAY ×1 ▶ 00:50/00:50 following")
	want("after the file grew", "STALLED 10s")
	poll() // nothing new
	tickAt(31 * time.Second)
	tickAt(60 * time.Second) // the run wrote nothing since t+30s
	r.press("G")
	want("a run that stopped writing", "REPLAY ×1 ▶ 00:55/00:55 following")

	writeTo(time.Hour)
	poll()
	if r.following {
		t.Error("still following after the run's end event")
	}
	r.press("G")
	want("at the run's end", "REPLAY ×1 end 01:25/01:25")
	want("at the run's end", "run ended: a bound failed (exit 1)")
}

// TestReplayHelpFitsEightyColumns: the footer keeps `?` and `q` at 80
// columns, and `?` lists every key of the replay.
func TestReplayHelpFitsEightyColumns(t *testing.T) {
	r := fromFile(t, writeEvents(t, stallRun()), 80, 24)
	r.seek(wallAt(15 * time.Second))
	lines := strings.Split(r.View(), "\n")
	if foot := lines[len(lines)-1]; !strings.HasSuffix(foot, "? more • q quit") {
		t.Errorf("footer at 80 columns: %q", foot)
	}
	r.press("?")
	full := r.View()
	assertFits(t, full, 80, 24)
	for _, want := range []string{"pause/play", "1s back", "10s on", "half speed", "double speed", "next fault window", "previous fault window", "start", "end", "next source", "engine log", "quit"} {
		if !strings.Contains(full, want) {
			t.Errorf("? does not list %q:\n%s", want, full)
		}
	}
}

// TestReplayFollowsEveryArmToItsEnd: a several-arm run is over when every
// arm's end event has come, not the first.
func TestReplayFollowsEveryArmToItsEnd(t *testing.T) {
	evs := armsRun()
	last := evs[len(evs)-1]
	if last.Kind != event.KindEnd || last.Arm != "fixed" {
		t.Fatalf("the merged run ends with %s of %q, want fixed's end", last.Kind, last.Arm)
	}
	var batches [][]event.Event
	batches = append(batches, evs[:len(evs)-1], evs[len(evs)-1:])
	i := 0
	follow := func() ([]event.Event, error) {
		if i >= len(batches) {
			return nil, nil
		}
		i++
		return batches[i-1], nil
	}
	r := NewReplay(ReplayConfig{Follow: follow, FromEnd: true}, Options{Renderer: asciiRenderer()})
	r.Update(tea.WindowSizeMsg{Width: 140, Height: 45})
	r.Update(r.poll(0)())
	if !r.following || !strings.Contains(r.tag(), "following") {
		t.Errorf("stopped following at main's end, before fixed's: %q", r.tag())
	}
	r.Update(r.poll(0)())
	if r.following {
		t.Errorf("still following after every arm's end: %q", r.tag())
	}
}

// TestReplayRunsInAProgram: the replay in a bubbletea program, following a
// file that grows while the full-screen log reads the engines' logs in its
// commands' goroutines (run with -race), plays and quits.
func TestReplayRunsInAProgram(t *testing.T) {
	evs := stallRun()
	var mu sync.Mutex
	n := 40 // events "written" so far; each poll writes 200 more
	follow := func() ([]event.Event, error) {
		mu.Lock()
		defer mu.Unlock()
		from := min(n, len(evs))
		n = min(n+200, len(evs))
		return evs[from:n], nil
	}
	logs := make(chan time.Time, 64)
	cfg := ReplayConfig{Name: "events.jsonl", Events: evs[:40], Follow: follow, FromEnd: true,
		LogTail: func(engine string, _ int, at time.Time) []string {
			select {
			case logs <- at:
			default:
			}
			return []string{"INFO log of " + engine}
		}}
	r := NewReplay(cfg, Options{Renderer: asciiRenderer(), Frame: 5 * time.Millisecond, Clock: 20 * time.Millisecond})
	tm := teatest.NewTestModel(t, r, teatest.WithInitialTermSize(140, 45))
	waitOutput(t, tm, "REPLAY ×1")
	sendKey(tm, "l")
	waitOutput(t, tm, "INFO log of source-0")
	select {
	case at := <-logs:
		if at.IsZero() {
			t.Error("LogTail was asked for the log at no instant")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LogTail was not called")
	}
	tm.Send(tea.KeyMsg{Type: tea.KeyEsc})
	// At ×64 the replay catches up with the end however far the file
	// has grown when G is pressed.
	sendKey(tm, "]]]]]]")
	sendKey(tm, "G")
	waitOutput(t, tm, "run ended: a bound failed")
	sendKey(tm, "q")
	if final, ok := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Replay); !ok || !final.m.quitting {
		t.Errorf("final model %T did not quit", final)
	}
}

// stallKind is the registered stall, as a key's edge finds it.
func stallKind(t *testing.T) *fault.Kind {
	t.Helper()
	k, ok := fault.Lookup(fault.ActionStall)
	if !ok {
		t.Fatal("no stall kind")
	}
	return k
}
