// Package ui is p2pfault's terminal dashboard: a bubbletea face over one
// experiment's events. It shows per-source pull latency and hit rate, the
// engine processes, faults and checks as they happen, and its keys ask the
// experiment's Controller to fire faults. It never touches a process.
package ui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
)

// Options tune the dashboard. Zero values take the defaults noted.
type Options struct {
	// Now is the clock (time.Now); tests pin it.
	Now func() time.Time
	// Window is the time span of the latency charts (default 60 s × scale).
	Window time.Duration
	// Recent is the rolling window of p50/p95/max and the hit rate
	// (default 10 s × scale).
	Recent time.Duration
	// Frame is the least time between two batches of events, so at most
	// 1/Frame redraws a second come from events (default 100 ms).
	Frame time.Duration
	// Clock is how often countdowns move without events (default 250 ms).
	Clock time.Duration
	// MaxSamples bounds each source's ring of recent pulls (default 16384).
	MaxSamples int
	// LogLines bounds the event log (default 500).
	LogLines int
	// Renderer pins the colour profile; nil is the terminal's, with
	// NO_COLOR honoured.
	Renderer *lipgloss.Renderer
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Frame <= 0 {
		o.Frame = 100 * time.Millisecond
	}
	if o.Clock <= 0 {
		o.Clock = 250 * time.Millisecond
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = 16384
	}
	if o.LogLines <= 0 {
		o.LogLines = 500
	}
	if o.Renderer == nil {
		o.Renderer = terminalRenderer()
	}
	return o
}

type viewMode int

const (
	modeDashboard viewMode = iota
	modeLog
)

// Model is the dashboard, a tea.Model. It owns all state and routes every
// message (Update, its keys in handleKey); panels only render what it
// hands them. View picks the screen: the one-arm dashboard (layout.go),
// several arms (armsview.go), start-up (startup.go) or an engine's log
// (logview.go).
type Model struct {
	ctrl   Controller
	events <-chan event.Event // the live bus; nil when a replay feeds the Model (replay.go)
	done   <-chan struct{}
	opts   Options
	// A feed other than the live bus (a replay, replay.go) shows its mark
	// in the header, in place of the elapsed time, and its keys in the
	// footer and `?`; it sets them, the Model does not know it. Zero live.
	mark     string
	feedKeys help.KeyMap

	arms    *arms
	st      *state // the arm shown: arms.first()
	keys    KeyMap
	help    help.Model
	spinner spinner.Model
	styles  *Styles

	width, height int
	selected      int
	// rank is the data-parallel rank of the selected source the fault
	// keys act on; -1: the whole engine (the rank picker, rank.go).
	rank int
	// decoder is the decoder the fault keys act on instead of the selected
	// source; -1: the source (the decoder picker, rank.go).
	decoder    int
	armSel     int // several arms: 0 = keys act on every arm, k = on arm k only (armsview.go)
	mode       viewMode
	logEngine  string
	logLines   []string
	clockTicks int
	failTails  []engineTail
	tailsStage int // failStage the failed engines' logs were last fetched at
	quitting   bool

	// scratch holds canvases reused from frame to frame (pixels, not
	// state); a pointer, so View on a copy of the Model reuses them.
	scratch *renderScratch
}

// New returns the dashboard over events; its keys call ctrl.
func New(ctrl Controller, events <-chan event.Event, opts Options) Model {
	opts = opts.withDefaults()
	styles := NewStyles(opts.Renderer)
	h := help.New()
	h.Styles = styles.Help
	a := newArms(opts.MaxSamples, opts.LogLines)
	return Model{
		ctrl:    ctrl,
		events:  events,
		opts:    opts,
		arms:    a,
		st:      a.first(),
		keys:    DefaultKeyMap().withLink(false), // in force once the run says it relays its pairs
		help:    h,
		spinner: spinner.New(spinner.WithSpinner(spinner.Dot), spinner.WithStyle(styles.Starting.Style)),
		styles:  &styles,
		width:   80,
		height:  24,
		scratch: &renderScratch{},
		rank:    -1,
		decoder: -1,
	}
}

// Run shows the dashboard on the terminal's alternate screen until the
// user quits (q or ctrl+c, also after the run ended) or ctx is done. The
// caller then stops the experiment and cleans up.
func Run(ctx context.Context, ctrl Controller, events <-chan event.Event, opts Options) error {
	if ctrl == nil {
		return errors.New("dashboard: no experiment controller")
	}
	if events == nil {
		return errors.New("dashboard: no event channel")
	}
	m := New(ctrl, events, opts)
	stop := make(chan struct{})
	defer close(stop)
	m.done = stop
	return runProgram(ctx, "dashboard", m)
}

// runProgram shows m on the terminal's alternate screen until it quits or
// ctx is done; its error names what ran: ctrl+c is
// exitcode.ErrInterrupted, an ended ctx its cause, and so is a terminal
// that went away under it.
//
// Signals are the caller's (cli.Main's), not bubbletea's: bubbletea would
// turn a SIGTERM into a plain quit, which a run with a case takes for the
// user's q, and it does not hear SIGHUP at all. With its handler off every
// signal ends ctx, with the signal as the cause.
func runProgram(ctx context.Context, what string, m tea.Model) error {
	ctx, stop := untilHangup(ctx, os.Stdout) // bubbletea's output
	defer stop()
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithoutSignalHandler())
	if _, err := p.Run(); err != nil {
		if errors.Is(err, tea.ErrInterrupted) {
			return fmt.Errorf("%s: %w", what, exitcode.ErrInterrupted)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, context.Cause(ctx))
		}
		if errors.Is(err, syscall.EIO) {
			// A closed terminal's reads fail with EIO (its SIGHUP may
			// come after): the same way out as the SIGHUP.
			return fmt.Errorf("%s: %w: the terminal closed (%v)", what, exitcode.ErrInterrupted, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Init starts the event feed, the clock and the start-up spinner.
func (m Model) Init() tea.Cmd {
	cmds := []tea.Cmd{clockTick(m.opts.Clock), m.spinner.Tick}
	if m.events != nil {
		cmds = append(cmds, waitEvents(m.events, m.done, 0))
	}
	return tea.Batch(cmds...)
}

// Update routes every message; it is the only place state changes.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.Width = msg.Width
		return m, nil
	case tea.KeyMsg:
		return m.handleKey(msg)
	case eventsMsg:
		return m.handleEvents(msg)
	case clockMsg:
		m.clockTicks++
		cmds := []tea.Cmd{clockTick(m.opts.Clock)}
		// The full-screen log follows its engine about once a second.
		if m.mode == modeLog && m.ctrl != nil && m.clockTicks%m.ticksPerSecond() == 0 {
			cmds = append(cmds, fetchLogTail(m.ctrl, m.logEngine, logTailLines))
		}
		return m, tea.Batch(cmds...)
	case spinner.TickMsg:
		if m.st.up() || m.st.ended {
			return m, nil // the spinner stops once start-up is over
		}
		var cmd tea.Cmd
		m.spinner, cmd = m.spinner.Update(msg)
		return m, cmd
	case actionDoneMsg:
		m.actionDone(msg)
		return m, nil
	case logTailMsg:
		if m.mode == modeLog && msg.engine == m.logEngine {
			m.logLines = msg.lines
		}
		return m, nil
	case failTailsMsg:
		m.failTails = msg.tails
		return m, nil
	}
	return m, nil
}

func (m Model) ticksPerSecond() int {
	return max(1, int(time.Second/m.opts.Clock))
}

func (m Model) nowT() time.Duration { return m.st.nowT(m.opts.Now()) }

// keep is how far back samples must be kept: the longest window shown.
func (m Model) keep() time.Duration { return max(m.window(), m.recent()) }

func (m Model) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * m.st.timeScale())
}

func (m Model) window() time.Duration {
	if m.opts.Window > 0 {
		return m.opts.Window
	}
	return m.scaled(60 * time.Second)
}

func (m Model) recent() time.Duration {
	if m.opts.Recent > 0 {
		return m.opts.Recent
	}
	return m.scaled(10 * time.Second)
}

// bridge is the longest silence a latency line bridges: three trial
// intervals, so one late or lost pull does not break it but a hung source does.
func (m Model) bridge() time.Duration {
	if m.st.run != nil && m.st.run.Interval > 0 {
		return 3 * m.st.run.Interval
	}
	return m.scaled(1500 * time.Millisecond)
}

func (m Model) handleEvents(msg eventsMsg) (tea.Model, tea.Cmd) {
	keep := m.keep()
	for _, ev := range msg.events {
		m.arms.route(ev).apply(ev, keep)
		m.st = m.arms.first()
		if ev.Kind == event.KindRun {
			keep = m.keep() // the time scale is known now
			m.keys = m.keys.withLink(m.st.run != nil && m.st.run.Link)
		}
	}
	var cmds []tea.Cmd
	if msg.closed {
		for _, arm := range m.arms.order {
			m.arms.by[arm].closeStream(m.opts.Now())
		}
	} else if m.events != nil {
		cmds = append(cmds, waitEvents(m.events, m.done, m.opts.Frame))
	}
	// Fetch the failed engines' last lines on the first warning, and
	// again when the run gives up: the logs will have moved on.
	if stage := m.failStage(); stage > m.tailsStage && m.ctrl != nil {
		m.tailsStage = stage
		cmds = append(cmds, fetchFailTails(m.ctrl, m.failedEngines(), 12))
	}
	if m.selected >= len(m.st.sources) {
		m.selected = 0
	}
	return m, tea.Batch(cmds...)
}

// handleKey maps a key to an action; a key with nothing to act on says
// why in the event log and calls nothing, and a fault the run's check
// refuses says why when its command returns (actionDone).
func (m Model) handleKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		m.quitting = true
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.help.ShowAll = !m.help.ShowAll
		return m, nil
	}
	if m.arms.multi() {
		if mm, cmd, ok := m.armKey(msg); ok {
			return mm, cmd
		}
	}

	if m.mode == modeLog {
		return m.logKey(msg)
	}

	n := len(m.st.sources)
	switch {
	case key.Matches(msg, k.Next):
		if n > 0 {
			m.selected, m.rank, m.decoder = (m.selected+1)%n, -1, -1
		}
	case key.Matches(msg, k.Prev):
		if n > 0 {
			m.selected, m.rank, m.decoder = (m.selected+n-1)%n, -1, -1
		}
	case key.Matches(msg, k.Rank):
		m = m.nextRank(msg.String())
	case key.Matches(msg, k.Decoder):
		m = m.nextDecoder()
	case key.Matches(msg, k.Select):
		i := int(msg.Runes[0] - '1')
		if i >= n {
			m.st.addLog(m.nowT(), levelWarn, "%s: no source %d (the run has %d)", msg.String(), i, n)
			break
		}
		m.selected, m.rank, m.decoder = i, -1, -1
	case key.Matches(msg, k.Pause):
		if m.ctrl == nil || m.st.ended {
			m.st.addLog(m.nowT(), levelWarn, "p: %s", m.cannotProbe())
			break
		}
		m.st.probing = !m.st.probing
		word := "resumed"
		if !m.st.probing {
			word = "paused"
		}
		m.st.addLog(m.nowT(), levelInfo, "probing %s (key)", word)
		return m, setProbing(m.ctrl, m.st.probing)
	case key.Matches(msg, k.Log):
		return m.openLog(event.SourceName(m.selected))
	case key.Matches(msg, k.Back):
		m.help.ShowAll = false
	default:
		for _, f := range k.Faults {
			if !key.Matches(msg, f.Binding) {
				continue
			}
			a := m.action(f.Kind)
			if why := m.refusal(a); why != "" {
				m.st.addLog(m.nowT(), levelWarn, "%s: %s", msg.String(), why)
				return m, nil
			}
			return m, controllerAction(m.ctrl, msg.String(), a)
		}
	}
	return m, nil
}

func (m Model) cannotProbe() string {
	if m.ctrl == nil {
		return "no experiment to control"
	}
	return "the run has ended"
}

// refusal says why the dashboard has nothing to fire action a on now,
// or "": no run to control, the run over, its cluster still starting, no
// such source. Whether the fault may act on its target is the run's one
// check (the experiment's), asked when the key fires: its answer, a
// *fault.Refused, comes back with the key's command (actionDone).
func (m Model) refusal(a fault.Action) string {
	i := a.Source
	switch {
	case m.ctrl == nil:
		return "no experiment to control"
	case m.st.ended:
		return "the run has ended"
	case !m.st.up():
		return "the cluster is still starting"
	case a.Decoder:
		if i < 0 || i >= m.decoders() {
			return fmt.Sprintf("no decoder %d", i)
		}
	case i < 0 || i >= len(m.st.sources):
		return fmt.Sprintf("no source %d", i)
	}
	return ""
}

// actionDone shows what became of a key's action: each arm's refusal as
// the key's answer, in the words of the kind's rule, or the action's
// error.
func (m Model) actionDone(msg actionDoneMsg) {
	if rs := fault.RefusalsIn(msg.err); len(rs) > 0 {
		for _, r := range rs {
			st := m.st
			if arm, ok := m.arms.by[r.Arm]; ok && r.Arm != "" {
				st = arm
			}
			st.addLog(m.nowT(), levelWarn, "%s: %v", msg.key, r.Err)
		}
		return
	}
	if msg.err != nil {
		m.st.addLog(m.nowT(), levelError, "%s: %v", msg.action, msg.err)
	}
}

// View draws the screen for the current mode, clipped to the window.
func (m Model) View() string {
	if m.quitting {
		return ""
	}
	w, h := m.width, m.height
	if w <= 0 || h <= 0 {
		return ""
	}
	switch {
	case m.mode == modeLog:
		return clip(m.logScreen(w, h), w, h)
	case m.arms.multi():
		return clip(m.armsView(w, h), w, h)
	case !m.st.up():
		return clip(m.startupView(w, h), w, h)
	default:
		return clip(m.dashboard(w, h), w, h)
	}
}

// footer is the help the footer shows: the live keys given, or the feed's.
func (m Model) footer(live help.KeyMap) help.KeyMap {
	if m.feedKeys != nil {
		return m.feedKeys
	}
	return live
}
