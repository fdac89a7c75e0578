package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"p2pfault/cli"
	"p2pfault/event"
	"p2pfault/fault"
	"p2pfault/ui"
)

// zap is a kind this test registers with a case of its own: it opens a
// fault window on its source for its "for" and closes it, touching no
// process. Nothing outside this file knows of it.
func registerZap(t *testing.T) {
	t.Helper()
	t.Cleanup(fault.Register(&fault.Kind{
		Name: "zap", Key: "z", Help: "zap", LongHelp: "zap (a test's case)", Order: 97,
		TakesFor: true, Leaves: "zapped", Opens: true, Ending: fault.EndsAfterFor, Case: fault.OwnCase,
		Act: func(f *fault.Fire) error {
			env := f.Env
			f.Enter()
			env.Record("zap", f.For, f.By, nil)
			env.OpenWindow(time.Now(), true)
			env.Go(func() {
				select {
				case <-time.After(f.For):
				case <-env.Context().Done():
				}
				f.Lift()
				env.CloseWindow(time.Now())
			})
			return nil
		},
	}))
}

// TestARegisteredCaseIsAcceptedEverywhere: a kind registered with a case
// (in this test, with no other file edited) is a case for `run --case`
// and `slice --cases` and in their help, its preset is a timeline on
// source-0, the dashboard's header names it and its key fires it.
func TestARegisteredCaseIsAcceptedEverywhere(t *testing.T) {
	registerZap(t)
	t.Setenv("P2PFAULT_TEST_MAIN", "1")
	t.Setenv("GORACE", "atexit_sleep_ms=0")

	// The timeline: the case's preset.
	tl, err := fault.Preset("zap", 10*time.Second, 30*time.Second)
	if err != nil || tl.String() != "at 10s zap source-0 for 30s" {
		t.Errorf("Preset(zap) = %q, %v; want at 10s zap source-0 for 30s", tl, err)
	}
	if got := fault.CaseList(); got != "stall, kill, replace, remove, partition, gone, late-fetch, zap, half-open, ack-withheld, fetch-lost, slow-link or none" {
		t.Errorf("CaseList() = %q", got)
	}

	// The help.
	for _, tt := range []struct{ cmd, want string }{
		{"run", "fault case: stall, kill, replace, remove, partition, gone, late-fetch, zap, half-open, ack-withheld, fetch-lost, slow-link or none"},
		{"slice", "cases to run: stall, kill, replace, remove, partition, gone, late-fetch, zap, half-open, ack-withheld, fetch-lost, slow-link"},
	} {
		var stdout, stderr bytes.Buffer
		if code := cli.Main([]string{tt.cmd, "--help"}, strings.NewReader(""), &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), tt.want) {
			t.Errorf("%s --help: exit %d, want %q in:\n%s%s", tt.cmd, code, tt.want, stdout.String(), stderr.String())
		}
	}

	// run --case and slice --cases run it on source-0, on the virtual
	// cluster at time scale 1, briefly: a zap touches no engine, so its
	// window's length asks nothing of the cluster.
	short := []string{"--fault-at", "2s", "--stall-for", "6s", "--recovery", "3s"}
	for _, tt := range []struct {
		name string
		args []string
		rows string // the events file of the (only) row
	}{
		{"run --case zap", append([]string{"run", "--headless", "--case", "zap"}, short...), ""},
		{"slice --cases zap", append([]string{"slice", "--cases", "zap", "--arms", "main"}, short...), "main-zap"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			var r virtualRun
			synctest.Test(t, func(t *testing.T) { r = runVirtual(t, append(tt.args, "--out", out)...) })
			if r.code != 0 {
				t.Fatalf("exit %d, want 0 (a zap touches no engine):\n%s%s", r.code, r.stdout, r.stderr)
			}
			stdout := bytes.NewBufferString(r.stdout)
			run, fired := zapEvents(t, filepath.Join(out, tt.rows, "events.jsonl"))
			if run == nil || run.Case != "zap" || run.Timeline != "at 2s zap source-0 for 6s" {
				t.Errorf("run event %+v, want case zap and its preset as the timeline", run)
			}
			if !fired {
				t.Errorf("no scripted zap on source-0 in the events\n%s", stdout.String())
			}
			if !strings.Contains(stdout.String(), "zap") {
				t.Errorf("the verdict table does not name the case:\n%s", stdout.String())
			}
		})
	}

	// The dashboard: the header names the case's fault, z fires it.
	ctrl := &zapCtrl{called: make(chan string, 4)}
	events := make(chan event.Event, 64)
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.Ascii)
	start := time.Now()
	tm := teatest.NewTestModel(t, ui.New(ctrl, events, ui.Options{Renderer: r, Frame: 5 * time.Millisecond, Now: func() time.Time { return start.Add(2 * time.Second) }}),
		teatest.WithInitialTermSize(160, 48))
	t.Cleanup(func() { _ = tm.Quit(); tm.WaitFinished(t, teatest.WithFinalTimeout(5*time.Second)) })
	send := func(ev event.Event) { ev.Wall = start; events <- ev }
	send(event.Event{Kind: event.KindRun, Run: &event.RunInfo{Arm: "main", Case: "zap", Engine: "sim", TimeScale: 1, Sources: 2,
		Interval: 500 * time.Millisecond, FaultAt: 10 * time.Second, FaultFor: 30 * time.Second, Started: start}})
	// The header counts down to the schedule the experiment sends right
	// after the run event: the case's preset.
	send(event.Event{Kind: event.KindSchedule, Schedule: &event.ScheduleInfo{Timeline: "at 10s zap source-0 for 30s",
		Steps: []event.ScheduledFault{{At: 10 * time.Second, Action: "zap", Source: 0, For: 30 * time.Second}}}})
	for i, name := range []string{"source-0", "source-1", "decoder"} {
		role := event.RoleSource
		if name == "decoder" {
			role, i = event.RoleDecoder, 0
		}
		send(event.Event{Kind: event.KindEngine, Engine: &event.EngineInfo{Name: name, Role: role, Index: i, State: event.StateReady, Pid: 100 + i}})
	}
	for i := 0; i < 2; i++ {
		send(event.Event{Kind: event.KindCondition, Condition: &event.ConditionInfo{Source: i, Condition: event.CondUp, Label: "READY"}})
	}
	send(event.Event{Kind: event.KindPhase, Phase: event.PhaseBaseline})
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("zap source-0 in")) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("z")})
	select {
	case got := <-ctrl.called:
		if got != "zap 0" {
			t.Errorf("z fired %q, want zap 0", got)
		}
	case <-time.After(10 * time.Second):
		t.Error("z fired nothing")
	}
}

// zapEvents reads an events file: the run event, and whether a scripted
// zap was fired on source-0.
func zapEvents(t *testing.T, path string) (*event.RunInfo, bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var run *event.RunInfo
	fired := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev event.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Kind == event.KindRun:
			run = ev.Run
		case ev.Kind == event.KindFault && ev.Fault.Action == "zap" && ev.Fault.Source == 0 && ev.Fault.By == "script" && ev.Fault.Err == "":
			fired = true
		}
	}
	return run, fired
}

// zapCtrl is the dashboard's controller, recording what it is asked.
type zapCtrl struct {
	mu     sync.Mutex
	called chan string
}

func (c *zapCtrl) Fire(a fault.Action) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.called <- a.Kind.Name + " " + string(rune('0'+a.Source))
	return nil
}
func (c *zapCtrl) SetProbing(bool)              {}
func (c *zapCtrl) LogTail(string, int) []string { return nil }
