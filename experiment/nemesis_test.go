package experiment_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

// nemesisConfig is a short nemesis run on the virtual cluster at the
// seed's time (scale 1; a test runs it in a synctest bubble): stalls and
// kills on two sources for 150 s, a kill's restart 5 s.
func nemesisConfig(t *testing.T, seed int64) experiment.Config {
	return experiment.Config{
		Case:     fault.CaseNemesis,
		Duration: 150 * time.Second,
		Recovery: 10 * time.Second,
		Nemesis: &fault.Nemesis{
			Seed: seed, Kinds: []fault.Draw{{Kind: act(fault.ActionStall, 0, fault.Options{}).Kind}, {Kind: act(fault.ActionKill, 0, fault.Options{}).Kind}},
			Gap: 20 * time.Second, GapSpread: 5 * time.Second,
			Length: 10 * time.Second, LengthSpread: 5 * time.Second, Settle: 5 * time.Second,
		},
		Cluster: vcluster.Opener{Seed: 1, Config: runner.Config{
			RestartDelay:      5 * time.Second,
			LoadFailurePolicy: "recompute", // the CLI's default
			ExtraArgs:         []string{"--sim-startup-delay=0s", "--p2p-pending-handshake=prefill"},
		}},
		OutDir: t.TempDir(),
	}
}

// TestNemesisRunPlaysItsScheduleOneFaultAtATime runs a nemesis: its
// schedule is in the events (drawn again from the same seed it is the
// same) before any fault fires, the faults fire as scheduled, never two
// windows open at once, and the run ends at its duration.
func TestNemesisRunPlaysItsScheduleOneFaultAtATime(t *testing.T) {
	synctest.Test(t, testNemesisRunPlaysItsScheduleOneFaultAtATime)
}

func testNemesisRunPlaysItsScheduleOneFaultAtATime(t *testing.T) {
	cfg := nemesisConfig(t, 11)
	exp, err := experiment.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want, err := nemesisConfig(t, 11).ScriptedTimeline()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 3 {
		t.Fatalf("the schedule has %d faults: %s", len(want), want)
	}
	ch := exp.Subscribe()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := exp.Run(ctx); done <- err }()
	var evs []event.Event
	for ev := range ch {
		evs = append(evs, ev)
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}

	var sched *event.ScheduleInfo
	var fired []event.Event
	open := map[int]bool{}
	var doneAt time.Duration
	for i, ev := range evs {
		switch ev.Kind {
		case event.KindRun:
			if ev.Run.Nemesis != fault.NemesisRandom || ev.Run.Timeline != want.String() || ev.Run.Duration != 150*time.Second {
				t.Errorf("run event: nemesis %q, duration %v, timeline %q", ev.Run.Nemesis, ev.Run.Duration, ev.Run.Timeline)
			}
			if evs[i+1].Kind != event.KindSchedule {
				t.Errorf("the event after the run event is %s, want the schedule", evs[i+1].Kind)
			}
		case event.KindSchedule:
			sched = ev.Schedule
		case event.KindFault:
			if sched == nil {
				t.Fatalf("fault %+v before the schedule event", *ev.Fault)
			}
			if ev.Fault.By == "script" && ev.Fault.Action != fault.ActionReady && ev.Fault.Action != fault.ActionResume {
				fired = append(fired, ev)
			}
			if ev.Fault.Err != "" {
				t.Errorf("fault %+v failed", *ev.Fault)
			}
		case event.KindWindow:
			if ev.Window.End == 0 {
				for s := range open {
					t.Errorf("at %v a window opens on source-%d while source-%d's is open", ev.T, ev.Window.Source, s)
				}
				open[ev.Window.Source] = true
			} else {
				delete(open, ev.Window.Source)
			}
		case event.KindPhase:
			if ev.Phase == event.PhaseDone {
				doneAt = ev.T
			}
		}
	}
	if sched == nil {
		t.Fatal("no schedule event")
	}
	if sched.Nemesis != fault.NemesisRandom || sched.Seed != 11 || sched.Timeline != want.String() || len(sched.Steps) != len(want) || sched.AtOnce != 1 {
		t.Fatalf("schedule event %+v, want seed 11's %s", *sched, want)
	}
	if len(fired) != len(want) {
		t.Fatalf("%d faults fired, %d scheduled (%s)", len(fired), len(want), want)
	}
	for i, ev := range fired {
		st := sched.Steps[i]
		if ev.Fault.Action != st.Action || ev.Fault.Source != st.Source {
			t.Errorf("fault %d: %s source-%d, scheduled %s source-%d", i, ev.Fault.Action, ev.Fault.Source, st.Action, st.Source)
		}
		// A fault fires on time, to the bubble clock's nanosecond: the
		// schedule leaves room for each (its Settle after the one before).
		if ev.T != st.At {
			t.Errorf("fault %d (%s source-%d) fired at %v, scheduled at %v", i, st.Action, st.Source, ev.T, st.At)
		}
	}
	if doneAt != 150*time.Second {
		t.Errorf("the run was done at %v, want exactly its duration, 150 s", doneAt)
	}
}

// TestNemesisChecksFailInExactlyTheWindowsWhoseFaultFailed runs a nemesis
// of a kind registered here, flaky, that kills its source (and restarts
// it) on every other firing and on the others only opens and closes its
// window, touching nothing (a fault that did not take effect, as a broken
// executor's). The fault_took_effect check fails in exactly the windows of
// the fakes and holds in the others; every other check holds everywhere:
// a kill passes on either arm, at the seed's own bounds (on the virtual
// cluster no load can slow a pull), so what fails is the fault alone. The last window's
// recovery may be cut empty by the run's end when a restart ran long; it
// is the one check allowed to be empty. The run fails and names those
// windows; each window's verdict settled during the run is the final
// verdict's.
func TestNemesisChecksFailInExactlyTheWindowsWhoseFaultFailed(t *testing.T) {
	kill, _ := fault.Lookup(fault.ActionKill)
	var mu sync.Mutex
	fired := 0
	fake := map[int]bool{} // window index (1, 2, ...) -> faked
	t.Cleanup(fault.Register(&fault.Kind{
		Name: "flaky", Help: "flaky", Order: 98, Needs: event.CondUp, Leaves: event.CondRestarting,
		Opens: true, Ending: fault.EndsWithRecovery,
		Act: func(f *fault.Fire) error {
			mu.Lock()
			fired++
			faked := fired%2 == 0
			fake[fired] = faked
			mu.Unlock()
			if !faked {
				return kill.Act(f)
			}
			env := f.Env
			env.Record("flaky", 0, f.By, nil)
			env.OpenWindow(time.Now(), true)
			env.Go(func() {
				select {
				case <-time.After(5 * time.Second): // a restart's length
				case <-env.Context().Done():
				}
				env.CloseWindow(time.Now())
			})
			return nil
		},
		Verify: func(f *fault.Fire) fault.Effect {
			mu.Lock()
			faked := fake[fired]
			mu.Unlock()
			if faked {
				return fault.Effect{Detail: "the old session is still alive"}
			}
			return kill.Verify(f)
		},
	}))
	synctest.Test(t, func(t *testing.T) { testNemesisChecksFail(t, fake, &mu) })
}

func testNemesisChecksFail(t *testing.T, fake map[int]bool, mu *sync.Mutex) {
	cfg := nemesisConfig(t, 3)
	cfg.Nemesis.Kinds = []fault.Draw{{Kind: act("flaky", 0, fault.Options{}).Kind}}
	cfg.Nemesis.Gap, cfg.Nemesis.GapSpread = 30*time.Second, 5*time.Second // past the recovery window
	cfg.Duration = 240 * time.Second
	exp, err := experiment.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ch := exp.Subscribe()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := exp.Run(ctx); done <- err }()
	var settled []event.WindowVerdict
	var final *event.Verdict
	for ev := range ch {
		switch {
		case ev.Kind == event.KindWindowVerdict:
			settled = append(settled, *ev.WindowVerdict)
		case ev.Kind == event.KindVerdict && ev.Final:
			final = ev.Verdict
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if final == nil || len(final.Windows) < 4 {
		t.Fatalf("final verdict %+v: want 4 windows or more", final)
	}
	mu.Lock()
	defer mu.Unlock()
	var failedIn []string
	for _, w := range final.Windows {
		if w.Kind != "flaky" {
			t.Errorf("window %d is a %s", w.Index, w.Kind)
		}
		for _, c := range w.Checks {
			want := !(c.Name == check.NameFaultTookEffect && fake[w.Index])
			if c.Name == check.NameRecovery && c.Empty && w.Index == len(final.Windows) {
				continue // the run's end came before a pull of its recovery
			}
			if c.Passed != want {
				t.Errorf("window %d (faked %v): %s passed %v, want %v: %s", w.Index, fake[w.Index], c.Name, c.Passed, want, c.Detail)
			}
		}
		if !fake[w.Index] && !w.Passed && w.Index == len(final.Windows) {
			continue // see above
		}
		if w.Passed == fake[w.Index] {
			t.Errorf("window %d (faked %v) passed %v", w.Index, fake[w.Index], w.Passed)
		}
		if fake[w.Index] {
			failedIn = append(failedIn, fmt.Sprintf("window %d (flaky", w.Index))
		}
	}
	if final.Passed {
		t.Error("the run passed with faults that did not take effect")
	}
	for _, c := range final.Checks {
		if c.Name == check.NameFaultTookEffect && c.Passed {
			t.Errorf("the run's %s passed: %s", c.Name, c.Detail)
		}
	}
	if len(settled) < len(final.Windows)-1 {
		t.Errorf("%d windows settled during the run of %d", len(settled), len(final.Windows))
	}
	for _, s := range settled {
		f := final.Windows[s.Index-1]
		if !s.Settled || fmt.Sprint(s.Checks) != fmt.Sprint(f.Checks) {
			t.Errorf("window %d settled as %+v, the final verdict has %+v", s.Index, s.Checks, f.Checks)
		}
	}
	for _, w := range final.Windows {
		var failed []string
		for _, c := range w.Checks {
			if !c.Passed {
				failed = append(failed, c.Name)
			}
		}
		t.Logf("window %d at %s: faked %v, passed %v, failed checks %v", w.Index, w.Start.Round(time.Millisecond), fake[w.Index], w.Passed, failed)
	}
	k := final.Kinds[0]
	t.Logf("faked: %v; kind %s: %d windows, %d passed, %d failed", failedIn, k.Kind, k.Count, k.Passed, k.Failed)
}

// TestANemesisDrawHitsADecoder: a nemesis on a cluster of two decoders
// draws decoders beside the sources (seed 4: its first fault is "stall
// decoder-1"), the experiment plays that step on decoder-1 (the fault
// event names it, no source's window opens for it), and the decoder
// checks judge it.
func TestANemesisDrawHitsADecoder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := nemesisConfig(t, 4)
		cfg.Duration, cfg.Nemesis.Kinds = 60*time.Second, cfg.Nemesis.Kinds[:1] // stalls
		cfg.Nemesis.Gap, cfg.Nemesis.GapSpread = 10*time.Second, 2*time.Second
		cfg.Nemesis.Length, cfg.Nemesis.LengthSpread = 10*time.Second, 2*time.Second
		rc := cfg.Cluster.(vcluster.Opener).Config
		rc.Decoders = 2
		r := runVirtual(t, cfg, rc)
		if r.err != nil {
			t.Fatalf("run: %v", r.err)
		}
		var sched *event.ScheduleInfo
		var faults []string
		for _, ev := range r.events {
			switch ev.Kind {
			case event.KindSchedule:
				sched = ev.Schedule
			case event.KindFault:
				if ev.Fault.Err == "" {
					faults = append(faults, ev.Fault.Action+" "+ev.Fault.TargetName())
				}
			}
		}
		if sched == nil || len(sched.Steps) == 0 || sched.Steps[0].Target != "decoder-1" {
			t.Fatalf("schedule %+v: want its first step on decoder-1", sched)
		}
		if len(faults) < 2 || faults[0] != "stall decoder-1" || faults[1] != "resume decoder-1" {
			t.Errorf("faults %q: want decoder-1 stalled and resumed first", faults)
		}
		got := decoderChecks(r.verdict)
		if c, ok := got[check.NameHealthyDecoders]; !ok || !c.Passed || c.Empty {
			t.Errorf("%s = %+v (present %v), want judged and passed", check.NameHealthyDecoders, c, ok)
		}
	})
}
