package ui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"

	"p2pfault/event"
	"p2pfault/fault"
)

// scenePartitioned: source-0 partitioned at 10 s for 30 s. Its engine
// still runs (the process state says ready: only its packets are dropped),
// so the badge comes from the fault kind; pulls naming it wait, the other
// source keeps hitting.
func scenePartitioned() scene {
	var s script
	s.run(runInfo("partition", 2, 1))
	s.upCluster(2)
	s.samples(2, 0, 10*time.Second, 500*time.Millisecond, healthy)
	s.fault(10*time.Second, fault.ActionPartition, 0, 30*time.Second)
	s.cond(10*time.Second, event.ConditionInfo{Source: 0, Condition: event.CondNetwork, Fault: fault.ActionPartition, Label: "PARTITIONED", Until: 40 * time.Second})
	s.window(10*time.Second, event.Window{Source: 0, Start: 10 * time.Second, Recovers: true})
	s.add(10*time.Second, event.Event{Kind: event.KindPhase, Phase: event.PhaseFault})
	s.samples(2, 10*time.Second, 22*time.Second, 500*time.Millisecond, func(i int, start time.Duration, trial int64) (time.Duration, bool) {
		if i == 0 {
			return 8*time.Second - (start-10*time.Second)/4, false
		}
		return healthy(i, start, trial)
	})
	s.log(20*time.Second, "decoder", "P2P 9f1c: peer 127.0.0.1:7777 timed out")
	s.verdict(22*time.Second, liveVerdict(true), false)
	return scene{events: s.events, now: 22 * time.Second, ctrl: newFakeCtrl()}
}

// pressKey sends key k and runs the command it returns, as a live program
// would, folding its message in.
func pressKey(t testing.TB, m Model, k string) Model {
	t.Helper()
	next, cmd := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
	m = next.(Model)
	if cmd != nil {
		if msg := cmd(); msg != nil {
			m = update(t, m, msg)
		}
	}
	return m
}

func TestPartitionViewsMatchGolden(t *testing.T) {
	noRights := errors.New("partition needs CAP_NET_ADMIN: run as root or grant it with setcap cap_net_admin+ep /usr/local/bin/p2pfault")
	scenes := []struct {
		name    string
		scene   func() scene
		prepare func(testing.TB, Model) Model
	}{
		{name: "partitioned_source", scene: scenePartitioned},
		// h on a source with no network fault: the kind's own refusal.
		{name: "heal_refused", scene: sceneSteady, prepare: func(t testing.TB, m Model) Model { return pressKey(t, m, "h") }},
		// n with no rights: the experiment refuses with the setup message.
		{name: "partition_no_rights", scene: func() scene {
			sc := sceneSteady()
			sc.ctrl.err = noRights
			return sc
		}, prepare: func(t testing.TB, m Model) Model { return pressKey(t, m, "n") }},
		// n on a partitioned source: already cut off, h heals it.
		{name: "partition_twice", scene: scenePartitioned, prepare: func(t testing.TB, m Model) Model { return pressKey(t, m, "n") }},
	}
	for _, sc := range scenes {
		for _, size := range []struct{ w, h int }{{80, 24}, {160, 48}} {
			t.Run(fmt.Sprintf("%s_%dx%d", sc.name, size.w, size.h), func(t *testing.T) {
				s := sc.scene()
				m := feed(t, s, size.w, size.h)
				if sc.prepare != nil {
					m = sc.prepare(t, m)
				}
				out := m.View()
				assertFits(t, out, size.w, size.h)
				golden.RequireEqual(t, []byte(out))
			})
		}
	}
}

// The keys come from the registry: n and h fire partition and heal on the
// selected source, `?` lists them, the one-line help leaves them out (it
// keeps to 80 columns with the seed's kinds).
func TestPartitionKeysFireThroughTheRegistry(t *testing.T) {
	sc := scenePartitioned()
	m := feed(t, sc, 160, 48)
	m = pressKey(t, m, "h")
	if got := <-sc.ctrl.called; got != "heal 0" {
		t.Errorf("h fired %q, want heal 0", got)
	}
	st := sceneSteady()
	m = feed(t, st, 160, 48)
	m = pressKey(t, m, "n")
	if got := <-st.ctrl.called; got != "partition 0" {
		t.Errorf("n fired %q, want partition 0", got)
	}
	km := DefaultKeyMap()
	var short, full []string
	for _, b := range km.ShortHelp() {
		short = append(short, b.Help().Key+" "+b.Help().Desc)
	}
	for _, col := range km.FullHelp() {
		for _, b := range col {
			full = append(full, b.Help().Key+" "+b.Help().Desc)
		}
	}
	for _, want := range []string{"n partition (drop)", "h heal network"} {
		if !strings.Contains(strings.Join(full, "\n"), want) {
			t.Errorf("? help lacks %q:\n%s", want, strings.Join(full, "\n"))
		}
	}
	if s := strings.Join(short, " "); strings.Contains(s, "partition") || strings.Contains(s, "heal") {
		t.Errorf("one-line help lists network keys: %s", s)
	}
}
