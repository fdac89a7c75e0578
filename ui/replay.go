package ui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"p2pfault/event"
	"p2pfault/fault"
)

// A replay is the dashboard over a run's events read back from its file
// (`p2pfault replay`). It is the feed of DESIGN's third wave: the same
// Model, the same panels, the same state, fed the file's events instead of
// the live bus's, up to the replay's position on the run's own clock (the
// events' wall times). The Model's clock (Options.Now) is that position,
// so in-flight ages, countdowns and rolling windows are what the live
// dashboard showed at that instant. Stepping back rebuilds the Model from
// the first event (BenchmarkReplaySeekBack measures it); the Model itself
// only knows it is fed (its events channel is nil) and shows the replay's
// mark in the header and its keys in the footer.

// ErrReplayFault is the answer to a fault key in a replay.
var ErrReplayFault = errors.New("replay: faults are not fired in a replay")

// Replay speeds: `[` halves, `]` doubles, within these bounds.
const (
	minSpeed = 0.25
	maxSpeed = 64
)

// followPoll is how often a followed file is read for new events.
const followPoll = 250 * time.Millisecond

// followSlack is how far past the last event the replay's clock may run
// while it follows a run that is still writing: a live run writes several
// events a second, so its clock moves as the live one did; a run that has
// written nothing for this long (it crashed) stops there.
const followSlack = 5 * time.Second

// markSettle is how far into a fault window f and F land: the events
// that come with the fault (its phase, the source's condition, the
// engines' states, the verification) are in by then.
const markSettle = 50 * time.Millisecond

// markMerge merges fault windows opening this close together (several
// arms, several sources at one step) into one stop for f and F.
const markMerge = time.Second

// ReplayConfig is what a replay plays.
type ReplayConfig struct {
	// Name is the events file, for messages.
	Name string
	// Events are the file's events, in file order.
	Events []event.Event
	// Truncated says the file ended without the run's end event (a crash,
	// or a run still writing).
	Truncated bool
	// Follow returns the events written since the last call; nil when the
	// file is complete (no --follow).
	Follow func() ([]event.Event, error)
	// LogTail is an engine's last n log lines written by wall time at (the
	// full-screen log; "ARM/ENGINE" with several arms); nil: none.
	LogTail func(engine string, n int, at time.Time) []string
	// FromEnd starts at the end (with Follow, the live edge) instead of
	// the first event.
	FromEnd bool
}

// Replay is a tea.Model: the dashboard Model and the player that feeds it.
type Replay struct {
	m    Model
	cfg  ReplayConfig
	keys ReplayKeyMap

	events []event.Event
	at     []time.Time     // each event's instant on the run's clock, never decreasing
	fed    int             // events[:fed] are folded into m
	marks  []time.Time     // where fault windows open, sorted: f and F stop here
	arms   map[string]bool // every arm the events name: true once its end event came
	ended  bool            // every arm's run has ended

	pos       *position // the replay's instant: the Model's clock
	speed     float64
	paused    bool
	lastTick  time.Time // real time of the previous tick
	realNow   time.Time // real time of the latest tick (the live edge when following)
	following bool      // cfg.Follow is still polled
	onEdge    bool      // following, the position is the live edge and moves with it
}

// replayTickMsg moves the replay on; at is the real time of the tick.
type replayTickMsg struct{ at time.Time }

// followMsg carries what a followed file gained since the last poll.
type followMsg struct {
	events []event.Event
	err    error
}

// NewReplay returns the dashboard over cfg's events, at its start (or its
// end with FromEnd), playing at ×1. opts are the dashboard's; its clock is
// replaced by the replay's position.
func NewReplay(cfg ReplayConfig, opts Options) *Replay {
	r := &Replay{cfg: cfg, keys: DefaultReplayKeyMap(), speed: 1, following: cfg.Follow != nil, arms: map[string]bool{}, pos: &position{}}
	// The Model reads the position (its clock, its controller's logs) and
	// shows the replay's keys; it holds no pointer to the Replay.
	opts.Now = r.pos.now
	r.m = New(replayCtrl{pos: r.pos, logTail: cfg.LogTail}, nil, opts)
	r.m.feedKeys = r.keys
	r.add(cfg.Events)
	if len(r.at) > 0 {
		to := r.at[0]
		if cfg.FromEnd {
			to = r.at[len(r.at)-1]
		}
		r.pos.set(to)
		r.feed()
	}
	r.onEdge = r.following && cfg.FromEnd
	return r
}

// RunReplay shows the replay on the terminal's alternate screen until the
// user quits or ctx is done.
func RunReplay(ctx context.Context, cfg ReplayConfig, opts Options) error {
	if len(cfg.Events) == 0 && cfg.Follow == nil {
		return fmt.Errorf("replay %s: no events", cfg.Name)
	}
	return runProgram(ctx, "replay", NewReplay(cfg, opts))
}

// position is the replay's instant: the player moves it, the Model's clock
// and the replay's controller read it, the latter in a command's goroutine.
type position struct{ ns atomic.Int64 }

func (p *position) now() time.Time {
	ns := p.ns.Load()
	if ns == 0 {
		return time.Time{} // no event yet
	}
	return time.Unix(0, ns).UTC()
}

func (p *position) set(t time.Time) { p.ns.Store(t.UnixNano()) }

// now is the replay's position.
func (r *Replay) now() time.Time { return r.pos.now() }

func (r *Replay) start() time.Time {
	if len(r.at) == 0 {
		return time.Time{}
	}
	return r.at[0]
}

// end is the last instant the replay can show: the last event's, or while
// it follows a run still writing, the real time (at most followSlack past
// the last event).
func (r *Replay) end() time.Time {
	if len(r.at) == 0 {
		return time.Time{}
	}
	last := r.at[len(r.at)-1]
	if !r.following || r.ended || r.realNow.Before(last) {
		return last
	}
	if edge := last.Add(followSlack); r.realNow.After(edge) {
		return edge
	}
	return r.realNow
}

// live reports whether the replay follows a run that has not ended.
func (r *Replay) live() bool { return r.following && !r.ended }

// add appends events read from the file and indexes their instants and
// the fault windows they open.
func (r *Replay) add(evs []event.Event) {
	from := len(r.events)
	r.events = append(r.events, evs...)
	for i := from; i < len(r.events); i++ {
		ev := r.events[i]
		at := ev.Wall
		if i > 0 && (at.IsZero() || at.Before(r.at[i-1])) {
			at = r.at[i-1] // a stream without wall times, or one out of order: keep the file's order
		}
		r.at = append(r.at, at)
		switch ev.Kind {
		case event.KindRun:
			if _, seen := r.arms[ev.Arm]; !seen {
				r.arms[ev.Arm] = false
			}
		case event.KindEnd:
			r.arms[ev.Arm] = true
		}
		if mark, ok := windowMark(ev, at); ok {
			r.marks = append(r.marks, mark)
		}
	}
	r.marks = mergeMarks(r.marks)
	r.ended = len(r.arms) > 0
	for _, done := range r.arms {
		r.ended = r.ended && done
	}
}

// windowMark is where ev says a fault window opened: at the window's own
// event, or for a window only seen closed, its start on the run's clock.
// Window events are the one source of fault windows, here as on the
// charts (state.applyWindow).
func windowMark(ev event.Event, at time.Time) (time.Time, bool) {
	w := ev.Window
	if ev.Kind != event.KindWindow || w == nil {
		return time.Time{}, false
	}
	if w.End == 0 || ev.T < w.Start {
		return at, true
	}
	return at.Add(w.Start - ev.T), true
}

// mergeMarks sorts the marks and merges those within markMerge into the
// latest of them, so a jump lands after every event that opened the window.
func mergeMarks(marks []time.Time) []time.Time {
	sort.Slice(marks, func(a, b int) bool { return marks[a].Before(marks[b]) })
	var out []time.Time
	for _, m := range marks {
		if n := len(out); n > 0 && m.Sub(out[n-1]) < markMerge {
			out[n-1] = m
			continue
		}
		out = append(out, m)
	}
	return out
}

// seek moves the replay to instant to (clamped to the run) and folds in
// what the Model has not seen by then. Going back rebuilds the Model from
// the first event: its state is a fold over the events, never undone.
func (r *Replay) seek(to time.Time) tea.Cmd {
	if len(r.at) == 0 {
		return nil
	}
	if to.Before(r.start()) {
		to = r.start()
	}
	if end := r.end(); to.After(end) {
		to = end
	}
	if r.fed > 0 && to.Before(r.at[r.fed-1]) {
		r.m = r.m.refed()
		r.fed = 0
	}
	r.pos.set(to)
	r.onEdge = r.live() && !to.Before(r.end())
	return r.feed()
}

// feed folds the events up to the position into the Model, as one batch.
func (r *Replay) feed() tea.Cmd {
	pos := r.now()
	n := r.fed
	for n < len(r.events) && !r.at[n].After(pos) {
		n++
	}
	if n == r.fed {
		return nil
	}
	batch := r.events[r.fed:n]
	r.fed = n
	next, cmd := r.m.Update(eventsMsg{events: batch})
	r.m = next.(Model)
	return cmd
}

// refed is the Model with everything the events gave it forgotten and
// everything the user chose (size, selection, view, help, arm keys) kept.
func (m Model) refed() Model {
	a := newArms(m.opts.MaxSamples, m.opts.LogLines)
	m.arms, m.st = a, a.first()
	m.failTails, m.tailsStage = nil, 0
	return m
}

// Init starts the Model's clock and spinner, the replay's ticks and, when
// following, the first poll of the file.
func (r *Replay) Init() tea.Cmd {
	cmds := []tea.Cmd{r.m.Init(), r.tick()}
	if r.following {
		cmds = append(cmds, r.poll(0))
	}
	return tea.Batch(cmds...)
}

func (r *Replay) tick() tea.Cmd {
	return tea.Tick(r.m.opts.Frame, func(t time.Time) tea.Msg { return replayTickMsg{at: t} })
}

// poll reads the followed file after wait.
func (r *Replay) poll(wait time.Duration) tea.Cmd {
	follow := r.cfg.Follow
	read := func() tea.Msg {
		evs, err := follow()
		return followMsg{events: evs, err: err}
	}
	if wait <= 0 {
		return read
	}
	return tea.Tick(wait, func(time.Time) tea.Msg { return read() })
}

// Update plays the replay and routes everything else to the dashboard.
func (r *Replay) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case replayTickMsg:
		return r, tea.Batch(r.advance(msg.at), r.tick())
	case followMsg:
		return r, r.followed(msg)
	case tea.KeyMsg:
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
			// Keys typed fast come in one message ("]]"): each is a key.
			var cmds []tea.Cmd
			for _, ru := range msg.Runes {
				_, cmd := r.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{ru}, Alt: msg.Alt})
				cmds = append(cmds, cmd)
			}
			return r, tea.Batch(cmds...)
		}
		if cmd, ok := r.key(msg); ok {
			return r, cmd
		}
	}
	next, cmd := r.m.Update(msg)
	r.m = next.(Model)
	return r, cmd
}

// advance moves the position by the real time since the last tick times
// the speed. A long gap (a suspended terminal) counts as one frame.
func (r *Replay) advance(at time.Time) tea.Cmd {
	dt := time.Duration(0)
	if !r.lastTick.IsZero() {
		dt = min(max(at.Sub(r.lastTick), 0), time.Second)
	}
	r.lastTick, r.realNow = at, at
	if r.paused || len(r.at) == 0 {
		return nil
	}
	if r.onEdge && r.live() {
		// Following at the live edge, the replay stays on it (as tail -f
		// does) rather than trailing it by the gap it opened with.
		return r.seek(r.end())
	}
	return r.seek(r.now().Add(time.Duration(float64(dt) * r.speed)))
}

func (r *Replay) followed(msg followMsg) tea.Cmd {
	if msg.err != nil {
		r.following = false
		r.m.st.addLog(r.m.nowT(), levelWarn, "replay: stopped following %s: %v", r.cfg.Name, msg.err)
		return nil
	}
	if len(msg.events) > 0 {
		first := len(r.at) == 0
		r.add(msg.events)
		if first {
			r.pos.set(r.at[0])
			if r.cfg.FromEnd {
				r.pos.set(r.at[len(r.at)-1])
			}
			r.onEdge = r.cfg.FromEnd
		}
	}
	cmd := r.feed()
	if r.ended {
		r.following = false // the run ended: the file is complete
		return cmd
	}
	return tea.Batch(cmd, r.poll(followPoll))
}

// key handles the replay's own keys and refuses the ones that would act
// on a run; ok is false for the keys the dashboard handles as it does live
// (selection, log, help, quit).
func (r *Replay) key(msg tea.KeyMsg) (tea.Cmd, bool) {
	if r.m.mode == modeLog {
		return nil, false
	}
	k := r.keys
	step := func(d time.Duration) tea.Cmd { return r.seek(r.now().Add(d)) }
	switch {
	case key.Matches(msg, k.Pause):
		r.paused = !r.paused
		r.onEdge = false // the edge moves on without a paused replay
		return nil, true
	case key.Matches(msg, k.StepBack):
		return step(-time.Second), true
	case key.Matches(msg, k.Step):
		return step(time.Second), true
	case key.Matches(msg, k.LongBack):
		return step(-10 * time.Second), true
	case key.Matches(msg, k.Long):
		return step(10 * time.Second), true
	case key.Matches(msg, k.Slower):
		r.speed = max(minSpeed, r.speed/2)
		return nil, true
	case key.Matches(msg, k.Faster):
		r.speed = min(maxSpeed, r.speed*2)
		return nil, true
	case key.Matches(msg, k.NextFault):
		return r.jumpFault(msg.String(), true), true
	case key.Matches(msg, k.PrevFault):
		return r.jumpFault(msg.String(), false), true
	case key.Matches(msg, k.Start):
		return r.seek(r.start()), true
	case key.Matches(msg, k.End):
		return r.seek(r.end()), true
	}
	dk := r.m.keys
	if key.Matches(msg, dk.Pause) {
		r.m.st.addLog(r.m.nowT(), levelWarn, "%s: replay: the probe is not paused in a replay (space pauses the replay)", msg.String())
		return nil, true
	}
	refused := r.m.arms.multi() && key.Matches(msg, dk.Arm) // a narrows the fault keys
	for _, f := range dk.Faults {
		// Every fault key, in force or not (the link kinds' are in force
		// only on a run with links), says why it fires nothing here.
		refused = refused || slices.Contains(f.Keys(), msg.String())
	}
	if refused {
		r.m.st.addLog(r.m.nowT(), levelWarn, "%s: %v", msg.String(), ErrReplayFault)
		return nil, true
	}
	return nil, false
}

// jumpFault moves just inside the next (or previous) fault window. The
// previous one is the last that opened more than half a second before the
// position, so F from just inside a window goes to the one before.
func (r *Replay) jumpFault(keyName string, next bool) tea.Cmd {
	pos := r.now()
	if next {
		for _, m := range r.marks {
			if land := m.Add(markSettle); land.After(pos) {
				return r.seek(land)
			}
		}
	} else {
		for i := len(r.marks) - 1; i >= 0; i-- {
			if land := r.marks[i].Add(markSettle); land.Before(pos.Add(-500 * time.Millisecond)) {
				return r.seek(land)
			}
		}
	}
	what := "after"
	if !next {
		what = "before"
	}
	if len(r.marks) == 0 {
		r.m.st.addLog(r.m.nowT(), levelWarn, "%s: the run has no fault window", keyName)
	} else {
		r.m.st.addLog(r.m.nowT(), levelWarn, "%s: no fault window %s %s", keyName, what, fmtRunTime(r.m.nowT()))
	}
	return nil
}

// View is the dashboard's at the replay's position, the replay's mark in
// its header.
func (r *Replay) View() string {
	m := r.m
	m.mark = r.tag()
	return m.View()
}

// tag is the header's mark of a replay: its speed, whether it plays, its
// position and the run's length, on the run's clock from its first event.
func (r *Replay) tag() string {
	s := r.m.styles
	start := r.start()
	pos, total := r.now().Sub(start), r.end().Sub(start)
	state := "▶"
	switch {
	case !r.live() && !r.now().Before(r.end()):
		state = "end"
	case r.paused:
		state = "paused"
	}
	out := fmt.Sprintf("%s ×%s %s %s/%s", s.Phase.Render("REPLAY"), fmtSpeed(r.speed), state, fmtClock(pos), fmtClock(total))
	switch {
	case r.live():
		out += " following"
	case r.cfg.Truncated && !r.ended && state == "end":
		out += " (cut short)"
	}
	return out
}

func fmtSpeed(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// replayCtrl is the Controller of a replayed run: nothing to fire or
// pause, and the engines' logs as they were at the replay's position.
type replayCtrl struct {
	pos     *position
	logTail func(engine string, n int, at time.Time) []string // ReplayConfig.LogTail
}

func (c replayCtrl) Fire(fault.Action) error { return ErrReplayFault }

func (c replayCtrl) FireArm(string, fault.Action) error { return ErrReplayFault }

func (c replayCtrl) SetProbing(bool) {}

// LogTail runs in a command: it reads the position atomically.
func (c replayCtrl) LogTail(engine string, n int) []string {
	if c.logTail == nil {
		return []string{"replay: no engine logs for this run"}
	}
	return c.logTail(engine, n, c.pos.now())
}

var _ ArmController = replayCtrl{}
