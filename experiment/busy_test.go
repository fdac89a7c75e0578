package experiment_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/vcluster"
)

// TestBusyWindowOnTheVirtualCluster fires busy through a timeline on the
// virtual cluster: the load runs for its 10 s and stops at the window's
// end with nothing of it left in flight, its counts add up, the source's
// own queues show it (fault_took_effect), and the window is judged by the
// usual checks, the healthy source's among them.
func TestBusyWindowOnTheVirtualCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := runVirtual(t, experiment.Config{Timeline: "at 9999ms busy 8x200 source-0 for 10s"}, sliceEngines("main"))
		if r.err != nil {
			t.Fatalf("Run: %v", r.err)
		}
		var final *event.LoadInfo
		var win *event.Window
		var verified *event.Verification
		for _, ev := range r.events {
			switch {
			case ev.Kind == event.KindLoad && ev.Load.Final:
				final = ev.Load
			case ev.Kind == event.KindWindow && ev.Window.End > 0:
				win = ev.Window
			case ev.Kind == event.KindVerification && ev.Verification.Action == fault.ActionBusy:
				verified = ev.Verification
			}
		}
		if final == nil || win == nil {
			t.Fatalf("final load %+v, closed window %+v: want both", final, win)
		}
		if final.End != win.End || win.End-win.Start != 10*time.Second {
			t.Errorf("load ended at %v, window %v-%v: want both at the window's end, 10s after its start", final.End, win.Start, win.End)
		}
		c := final.LoadCounts
		if c.InFlight != 0 || c.Failed != 0 || c.Answered == 0 || c.Sent != c.Answered+c.Cancelled {
			t.Errorf("load counts %+v: want answers, no failure, every request sent answered or cancelled at the end", c)
		}
		if final.Concurrency != 8 || final.PromptTokens != 200 {
			t.Errorf("load %dx%d, want the timeline's 8x200", final.Concurrency, final.PromptTokens)
		}
		if verified == nil || !verified.Verified {
			t.Errorf("busy verification %+v: want the source's queues seen rising", verified)
		}
		judged := map[string]bool{}
		for _, c := range r.verdict.Checks {
			judged[c.Name] = true
		}
		for _, name := range []string{"faulted_max", "faulted_median_after_detect", "healthy_keeps_hitting", "recovery_hits_again", "fault_took_effect"} {
			if !judged[name] {
				t.Errorf("the busy window was not judged by %s (judged: %v)", name, r.verdict.Checks)
			}
		}
	})
}

// TestABusyLoadCutByTheRunsEndIsFinalBeforeTheEnd: a busy load fired as
// a key fires it, for 600 s, outlasts the run (its 30 s duration, then
// Run's end): the load stops with the run, and its final report is in the
// events before the end event, so the records every way out leaves say
// the load is over.
func TestABusyLoadCutByTheRunsEndIsFinalBeforeTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		exp, err := experiment.New(experiment.Config{
			Duration: 30 * time.Second, OutDir: t.TempDir(),
			Cluster: vcluster.Opener{Seed: 1, Config: sliceEngines("main")},
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := exp.Subscribe()
		var evs []event.Event
		read := make(chan struct{})
		go func() {
			defer close(read)
			for ev := range ch {
				evs = append(evs, ev)
			}
		}()
		go func() {
			time.Sleep(10 * time.Second)
			if err := exp.Fire(act(fault.ActionBusy, 0, fault.Options{For: 600 * time.Second, Arg: "8x200"})); err != nil {
				t.Errorf("busy source-0: %v", err)
			}
		}()
		if _, err := exp.Run(context.Background()); err != nil {
			t.Fatalf("Run: %v", err)
		}
		<-read
		final, ended := -1, -1
		for i, ev := range evs {
			switch {
			case ev.Kind == event.KindLoad && ev.Load.Final:
				final = i
			case ev.Kind == event.KindEnd:
				ended = i
			}
		}
		if final < 0 || ended < 0 || final > ended {
			t.Fatalf("the load's final report is event %d, the end event %d (of %d): want the final report, before the end", final, ended, len(evs))
		}
	})
}
