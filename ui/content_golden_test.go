package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/fault"
)

// sceneWrongText is a kill run with the content check on in which three
// pulls naming source-0, in flight at the kill, answered 200 with its
// blocks counted as cached and another text than the source's (what the
// sim's recompute-keeps-partial defect does): the panel counts them
// (wrong 3), its chart marks them, the event log tells them and the live
// check content_matches fails.
func sceneWrongText() scene {
	var s script
	info := runInfo("kill", 2, 1)
	info.ContentTokens, info.ContentMatch = 8, "exact"
	s.run(info)
	s.upCluster(2)
	s.samples(2, 0, 10*time.Second, 500*time.Millisecond, healthy)
	s.fault(10*time.Second, fault.ActionKill, 0, 0)
	s.cond(10*time.Second, event.ConditionInfo{Source: 0, Condition: event.CondRestarting, Fault: fault.ActionKill, Label: "KILLED", Down: true})
	s.window(10*time.Second, event.Window{Source: 0, Start: 10 * time.Second, Recovers: true})
	s.add(10*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseFault})
	s.samples(2, 10*time.Second, 16*time.Second, 500*time.Millisecond, func(i int, start time.Duration, trial int64) (time.Duration, bool) {
		if i == 0 {
			return 20 * time.Millisecond, start < 11500*time.Millisecond // the first three: cached, wrongly
		}
		return healthy(i, start, trial)
	})
	wrong := 0
	for k := range s.events {
		for j := range s.events[k].Samples {
			sm := &s.events[k].Samples[j]
			sm.Content = event.ContentSame
			if sm.Source == 0 && sm.Start >= 10*time.Second && sm.Hit() {
				sm.Content, sm.SourceText, sm.PullText = event.ContentDiffers, " the of and to in is that for", fmt.Sprintf(" was on be by at this from %d", wrong)
				wrong++
			}
		}
	}
	v := liveVerdict(true)
	v.Passed = false
	v.Checks = append(v.Checks, event.Result{Name: check.NameContentMatches,
		Detail: `3 pulls naming source-0 returned other text than the source's completion (first at 10.0s: pull " was on be by at this from 0", source " the of and to in is that for")`})
	s.verdict(16*time.Second, v, false)
	return scene{events: s.events, now: 16 * time.Second, ctrl: newFakeCtrl()}
}

func TestContentViewsMatchGolden(t *testing.T) {
	for _, size := range []struct{ w, h int }{{80, 24}, {160, 48}} {
		t.Run(fmt.Sprintf("wrong_text_%dx%d", size.w, size.h), func(t *testing.T) {
			out := feed(t, sceneWrongText(), size.w, size.h).View()
			assertFits(t, out, size.w, size.h)
			golden.RequireEqual(t, []byte(out))
		})
	}
}

// TestWrongTextIsCountedMarkedAndLogged reads the facts the goldens show
// off the model: the count, the chart's marks, the log lines.
func TestWrongTextIsCountedMarkedAndLogged(t *testing.T) {
	m := feed(t, sceneWrongText(), 160, 48)
	if got := m.st.sources[0].wrong; got != 3 {
		t.Errorf("source-0 wrong %d, want 3", got)
	}
	if got := m.st.sources[1].wrong; got != 0 {
		t.Errorf("source-1 wrong %d, want 0", got)
	}
	view := m.View()
	if !strings.Contains(view, "hits  55% ███████████           wrong 3") {
		t.Errorf("no `wrong 3` beside source-0's hits:\n%s", view)
	}
	if n := strings.Count(view, string(wrongRune)); n < 1 {
		t.Errorf("no %c on the latency chart:\n%s", wrongRune, view)
	}
	logged := 0
	for i := 0; i < m.st.log.Len(); i++ {
		if strings.HasPrefix(m.st.log.At(i).text, "wrong text: source-0 pull sent at t+10.0s (cached 256) returned") {
			logged++
		}
	}
	if logged != 1 {
		t.Errorf("%d log lines for the first wrong pull, want 1", logged)
	}

	// Without the content check (a stream from before it), differing texts
	// are not judged: nothing counted.
	sc := sceneWrongText()
	sc.events[0].Run.ContentTokens = 0
	if got := feed(t, sc, 160, 48).st.sources[0].wrong; got != 0 {
		t.Errorf("content check off: wrong %d, want 0", got)
	}
}
