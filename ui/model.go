// Package ui is p2pfault's terminal dashboard: a bubbletea face over one
// experiment's events. It shows per-source pull latency and hit rate, the
// engine processes, faults and checks as they happen, and its keys ask the
// experiment's Controller to fire faults. It never touches a process.
package ui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
	"p2pfault/probe"
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

// logTailLines is how many lines the full-screen log asks for.
const logTailLines = 500

// Model is the dashboard, a tea.Model. It owns all state and routes every
// message; panels only render what it hands them.
type Model struct {
	ctrl   Controller
	events <-chan event.Event // the live bus; nil when a replay feeds the Model (replay.go)
	done   <-chan struct{}
	opts   Options
	replay *Replay // the replay feeding the Model, nil live: the header's mark and the keys' help

	arms    *arms
	st      *state // the arm shown: arms.first()
	keys    KeyMap
	help    help.Model
	spinner spinner.Model
	styles  *Styles

	width, height int
	selected      int
	armSel        int // several arms: 0 = keys act on every arm, k = on arm k only (armsview.go)
	mode          viewMode
	logEngine     string
	logLines      []string
	clockTicks    int
	failTails     []engineTail
	tailsStage    int // failStage the failed engines' logs were last fetched at
	quitting      bool

	// scratch holds canvases reused from frame to frame (pixels, not
	// state); a pointer, so View on a copy of the Model reuses them.
	scratch *renderScratch
}

// renderScratch is each source panel's chartScratch, by source index.
type renderScratch struct {
	sources []*chartScratch
	perArm  map[string]*renderScratch // every arm's but the first (armsview.go)
}

func (r *renderScratch) source(i int) *chartScratch {
	for len(r.sources) <= i {
		r.sources = append(r.sources, &chartScratch{})
	}
	return r.sources[i]
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
		keys:    DefaultKeyMap(),
		help:    h,
		spinner: spinner.New(spinner.WithSpinner(spinner.Dot), spinner.WithStyle(styles.Starting.Style)),
		styles:  &styles,
		width:   80,
		height:  24,
		scratch: &renderScratch{},
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
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx))
	if _, err := p.Run(); err != nil {
		if errors.Is(err, tea.ErrInterrupted) {
			return fmt.Errorf("dashboard: %w", exitcode.ErrInterrupted)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("dashboard: %w", ctx.Err())
		}
		return fmt.Errorf("dashboard: %w", err)
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
		if msg.err != nil {
			m.st.addLog(m.nowT(), levelError, "%s: %v", msg.action, msg.err)
		}
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

// failStage is how far a start-up failure went: 0 none, 1 a warning
// before the cluster was up, 2 the run ended before it was up.
func (m Model) failStage() int {
	switch {
	case !m.st.startFailed:
		return 0
	case m.st.ended:
		return 2
	default:
		return 1
	}
}

// failedEngines are the engines whose logs explain a failed start-up: those
// not ready, or every engine when all reported ready.
func (m Model) failedEngines() []string {
	var names []string
	for _, e := range m.startupEngines() {
		if !e.ready {
			names = append(names, e.name)
		}
	}
	if len(names) == 0 {
		for _, e := range m.startupEngines() {
			names = append(names, e.name)
		}
	}
	return names
}

// handleKey maps a key to an action; a key that cannot act says why in
// the event log and calls nothing.
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
		switch {
		case key.Matches(msg, k.Back), key.Matches(msg, k.Log):
			m.mode, m.logLines = modeDashboard, nil
		case key.Matches(msg, k.Next):
			m.logEngine = m.nextEngine(m.logEngine)
			m.logLines = nil
			if m.ctrl != nil {
				return m, fetchLogTail(m.ctrl, m.logEngine, logTailLines)
			}
		}
		return m, nil
	}

	n := len(m.st.sources)
	switch {
	case key.Matches(msg, k.Next):
		if n > 0 {
			m.selected = (m.selected + 1) % n
		}
	case key.Matches(msg, k.Prev):
		if n > 0 {
			m.selected = (m.selected + n - 1) % n
		}
	case key.Matches(msg, k.Select):
		i := int(msg.Runes[0] - '1')
		if i >= n {
			m.st.addLog(m.nowT(), levelWarn, "%s: no source %d (the run has %d)", msg.String(), i, n)
			break
		}
		m.selected = i
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
		m.mode = modeLog
		m.logEngine = sourceEngine(m.selected)
		m.logLines = nil
		if m.ctrl != nil {
			return m, fetchLogTail(m.ctrl, m.logEngine, logTailLines)
		}
	case key.Matches(msg, k.Back):
		m.help.ShowAll = false
	default:
		for _, f := range k.Faults {
			if !key.Matches(msg, f.Binding) {
				continue
			}
			a := fault.Action{Kind: f.Kind, Source: m.selected}
			if why := m.refusal(a); why != "" {
				m.st.addLog(m.nowT(), levelWarn, "%s: %s", msg.String(), why)
				return m, nil
			}
			return m, controllerAction(m.ctrl, a)
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

// refusal says why action a cannot be taken now, or "" when it can:
// fault's one rule (fault.Kind.Refusal) over the condition the experiment
// sent, the one it refuses by itself. A source whose condition has not
// come yet is left to the experiment to judge.
func (m Model) refusal(a fault.Action) string {
	i := a.Source
	switch {
	case m.ctrl == nil:
		return "no experiment to control"
	case m.st.ended:
		return "the run has ended"
	case !m.st.up():
		return "the cluster is still starting"
	case i < 0 || i >= len(m.st.sources):
		return fmt.Sprintf("no source %d", i)
	}
	c := m.st.sources[i].cond
	if c == nil {
		return ""
	}
	return a.Kind.Refusal(sourceEngine(i), c.Condition)
}

// nextEngine cycles the full-screen log through every known engine.
func (m Model) nextEngine(cur string) string {
	var names []string
	for _, e := range m.st.engineOrder() {
		names = append(names, e.info.Name)
	}
	return cycleNext(names, cur)
}

// cycleNext is the name after cur in names, the first after the last (or
// when cur is not among them), cur when there is none.
func cycleNext(names []string, cur string) string {
	if len(names) == 0 {
		return cur
	}
	for i, n := range names {
		if n == cur {
			return names[(i+1)%len(names)]
		}
	}
	return names[0]
}

// startupEngines lists the engines the run needs (from RunInfo) and any
// others that reported, in process-table order.
func (m Model) startupEngines() []startupEngine {
	seen := map[string]bool{}
	var out []startupEngine
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		se := startupEngine{name: name}
		if e, ok := m.st.engines[name]; ok && e.reported {
			info := e.info
			se.info, se.ready = &info, e.everReady
		}
		out = append(out, se)
	}
	if m.st.run != nil {
		for i := 0; i < m.st.run.Sources && i < maxSources; i++ {
			add(sourceEngine(i))
		}
		add("decoder")
	}
	for _, e := range m.st.engineOrder() {
		add(e.info.Name)
	}
	return out
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
		hv := m.help.View(logKeys{m.keys})
		hh := lipgloss.Height(hv)
		body := logView{engine: m.logEngine, lines: m.logLines, styles: m.styles}.Render(w, h-hh)
		return clip(body+"\n"+hv, w, h)
	case m.arms.multi():
		return clip(m.armsView(w, h), w, h)
	case !m.st.up():
		return clip(m.startupView(w, h), w, h)
	default:
		return clip(m.dashboard(w, h), w, h)
	}
}

func (m Model) startupView(w, h int) string {
	hv := m.help.View(m.footer(startupKeys{m.keys}))
	hh := lipgloss.Height(hv)
	tails := m.failTails
	if len(tails) == 0 && m.st.startFailed {
		// Until LogTail answers, show the lines the run's log events carried.
		for _, e := range m.failedEngines() {
			if es, ok := m.st.engines[e]; ok {
				tails = append(tails, engineTail{engine: e, lines: es.logs.Last(12)})
			}
		}
	}
	v := startupView{
		run:      m.st.run,
		engines:  m.startupEngines(),
		spinner:  m.spinner.View(),
		failed:   m.st.startFailed,
		failures: m.st.failures,
		ended:    m.st.ended,
		exitCode: m.st.exitCode,
		replay:   m.replayTag(),
		tails:    tails,
		recent:   m.st.log.Last(8),
		styles:   m.styles,
	}
	return v.Render(w, h-hh) + "\n" + hv
}

// dashboard lays out the header, the source panels, the process table, the
// checks (or the final verdict) and the event log in w×h.
func (m Model) dashboard(w, h int) string {
	now := m.opts.Now()
	nowT := m.st.nowT(now)
	s := m.styles

	head := headerPanel{
		run: m.st.run, phase: m.st.phase, nowT: nowT, elapsed: m.st.elapsed(now),
		scale: m.st.timeScale(), probing: m.st.probing, ended: m.st.ended,
		selected: m.selected, nextFault: m.nextFault(nowT), replay: m.replayTag(), styles: s,
	}.Render(w)
	hv := m.help.View(m.footer(m.keys))
	var banner string
	if m.st.ended {
		res := fmt.Sprintf("run ended: %s (exit %d) · press q to quit", orDash(m.st.endMsg), m.st.exitCode)
		style := s.Pass
		if m.st.exitCode != 0 {
			style = s.Fail
		}
		banner = style.Render(res)
	}

	avail := h - lipgloss.Height(head) - lipgloss.Height(hv)
	if banner != "" {
		avail--
	}

	// Bottom sections first: they are small and fixed; the panels and the
	// event log share the rest.
	final := m.st.final && m.st.verdict != nil
	var checksH int
	switch {
	case final:
		checksH = verdictTable{verdict: m.st.verdict}.Height()
	case m.st.verdict != nil && h >= 40:
		checksH = 1 + len(m.st.verdict.Checks)
	default:
		checksH = 1
	}
	engines := m.st.engineOrder()
	procH := 1 + max(1, len(engines))
	if final && h < 40 {
		procH = 0 // the processes are gone; the verdict matters more
	}

	n := max(1, len(m.st.sources))
	cols := min(n, max(1, w/38))
	rows := (n + cols - 1) / cols
	// A run of many fault windows: the latest windows and the per-kind
	// summary (one line, the counts, on a small terminal).
	wp := windowsPanel{windows: m.st.windows, kinds: m.st.kinds, styles: s}
	winH := 0
	if wp.shown() {
		winH = 1
		if h >= 40 {
			winH = wp.Height(6)
		}
	}
	rest := avail - checksH - procH - winH
	const panelMin, panelMax, logMin = 9, 22, 3
	panelsH := min(rest-logMin, rows*panelMax)
	if panelsH < rows*panelMin {
		panelsH = min(rest, rows*panelMin)
	}
	panelsH = max(panelsH, 0)
	logH := max(rest-panelsH, 0)

	parts := []string{head}
	if panelsH > 0 {
		parts = append(parts, m.renderSources(w, panelsH, cols, rows, nowT))
	}
	if procH > 0 {
		parts = append(parts, procTable{engines: engines, metrics: m.st.metrics, styles: s}.Render(w, procH))
	}
	if final {
		parts = append(parts, verdictTable{verdict: m.st.verdict, run: m.st.run, styles: s}.Render(w, checksH))
	} else {
		parts = append(parts, checksPanel{verdict: m.st.verdict, styles: s}.Render(w, checksH))
	}
	if winH > 0 {
		parts = append(parts, wp.Render(w, winH))
	}
	if logH > 0 {
		parts = append(parts, eventLog{entries: m.st.log.Last(logH), styles: s}.Render(w, logH))
	}
	if banner != "" {
		parts = append(parts, banner)
	}
	parts = append(parts, hv)
	// Every part is already w wide; JoinVertical would pad them all to
	// the widest line instead of clipping.
	return strings.Join(parts, "\n")
}

// renderSources tiles the source panels cols wide and rows high.
func (m Model) renderSources(w, h, cols, rows int, nowT time.Duration) string {
	if len(m.st.sources) == 0 {
		return block([]string{m.styles.Dim.Render("waiting for the run's sources…")}, w, h)
	}
	rowH := h / rows
	pend := m.st.pending(nowT) // once a frame, for every panel
	var rowStrs []string
	for r := 0; r < rows; r++ {
		var cells []string
		used := 0
		for c := 0; c < cols; c++ {
			i := r*cols + c
			if i >= len(m.st.sources) {
				break
			}
			pw := w / cols
			if c == cols-1 {
				pw = w - used
			}
			used += pw
			cells = append(cells, m.sourcePanelWith(i, nowT, pend[i]).Render(pw, rowH))
		}
		rowStrs = append(rowStrs, joinBlocks(cells, rowH, w-used))
	}
	// Every row is w wide now: joined, not measured and padded again.
	out := strings.Join(rowStrs, "\n")
	if extra := h - rowH*rows; extra > 0 {
		out += "\n" + blankBlock(w, extra)
	}
	return out
}

// joinBlocks puts blocks of h lines each (every line already as wide as
// its block: block() made them) side by side, and pads each line with pad
// spaces: what lipgloss.JoinHorizontal and JoinVertical give such blocks,
// without measuring every line's width again.
func joinBlocks(blocks []string, h, pad int) string {
	lines := make([][]string, len(blocks))
	for i, b := range blocks {
		lines[i] = strings.SplitN(b, "\n", h)
	}
	tail := strings.Repeat(" ", max(pad, 0))
	var out strings.Builder
	for y := range h {
		if y > 0 {
			out.WriteByte('\n')
		}
		for _, l := range lines {
			if y < len(l) {
				out.WriteString(l[y])
			}
		}
		out.WriteString(tail)
	}
	return out.String()
}

// sparkBuckets is how many columns the hit-rate sparkline has.
const sparkBuckets = 20

// sourcePanel gathers what source i's panel shows. Its work is bounded by
// the ring, which holds only the windows shown.
func (m Model) sourcePanel(i int, nowT time.Duration) sourcePanel {
	return m.sourcePanelWith(i, nowT, m.st.pending(nowT)[i])
}

// sourcePanelWith is sourcePanel with source i's pulls in flight given.
func (m Model) sourcePanelWith(i int, nowT time.Duration, pend probe.Pending) sourcePanel {
	src := m.st.sources[i]
	recent, window := m.recent(), m.window()
	from := nowT - recent

	var lats []time.Duration
	var hitB, nB [sparkBuckets]int
	st := latencyStats{}
	for j := 0; j < src.points.Len(); j++ {
		p := src.points.At(j)
		if p.end <= from || p.end > nowT {
			continue
		}
		lats = append(lats, p.latency)
		if p.hit {
			st.hits++
		}
		b := int(float64(p.end-from) / float64(recent) * sparkBuckets)
		b = min(max(b, 0), sparkBuckets-1)
		nB[b]++
		if p.hit {
			hitB[b]++
		}
	}
	st.n = len(lats)
	if st.n > 0 {
		sort.Slice(lats, func(a, b int) bool { return lats[a] < lats[b] })
		st.p50 = nearestRank(lats, 0.50)
		st.p95 = nearestRank(lats, 0.95)
		st.max = lats[len(lats)-1]
	}
	spark := make([]float64, sparkBuckets)
	for b := range spark {
		if nB[b] > 0 {
			spark[b] = float64(hitB[b]) / float64(nB[b])
		}
	}
	kind, text := m.st.badge(i, nowT)
	return sourcePanel{
		index: i, selected: i == m.selected, badge: kind, badgeText: text,
		inflight: inflightLine{shown: m.st.sawStarts, n: pend.N, oldest: pend.Oldest},
		chart: latencyChart{points: &src.points, spans: &src.spans, inflight: pend.Starts, from: nowT - window, to: nowT,
			maxGap: m.bridge(), styles: m.styles, scratch: m.scratch.source(i)},
		window: window, recent: recent, stats: st, spark: spark, ttft: ttftOf(&src.points, from, nowT),
		n: src.n, ok200: src.ok200, errs: src.errs, pulled: src.pulled, wrong: src.wrong,
		styles: m.styles,
	}
}

// nearestRank is the q-quantile of sorted values.
func nearestRank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// nextFault is the header's countdown to the next scheduled fault (the
// first scripted one for a stream without a schedule event), or when the
// run ends.
func (m Model) nextFault(nowT time.Duration) string {
	run := m.st.run
	if run == nil || m.st.ended {
		return ""
	}
	what, scripted := firstFault(run)
	at := run.FaultAt
	if len(m.st.schedule) > 0 {
		// The schedule's next fault, as its event gave it (a nemesis'
		// steps, or a timeline's); none left once the last has fired.
		what, at = "", 0
		for _, f := range m.st.schedule {
			if f.At > nowT {
				what, at = fmt.Sprintf("%s %s", f.Action, sourceEngine(f.Source)), f.At
				break
			}
		}
	}
	beforeT0 := m.st.phase == "" || m.st.phase == event.PhaseStarting || m.st.phase == event.PhaseWarmup
	switch {
	case !scripted:
		if run.Duration > 0 && !beforeT0 {
			return "ends in " + fmtCountdown(run.Duration-nowT)
		}
		return "no scripted fault"
	case beforeT0:
		return fmt.Sprintf("%s at %s", what, fmtRunTime(at))
	case nowT < at:
		return fmt.Sprintf("%s in %s", what, fmtCountdown(at-nowT))
	case run.Duration > 0:
		return "ends in " + fmtCountdown(run.Duration-nowT)
	default:
		return ""
	}
}

// firstFault names the run's first scripted fault ("kill source-1"): the
// timeline's first step, or for a stream without one the case on
// source-0.
func firstFault(run *event.RunInfo) (string, bool) {
	if run.FaultAt <= 0 {
		return "", false
	}
	if tl, err := fault.Parse(run.Timeline); err == nil && len(tl) > 0 {
		return tl[0].Action.String(), true
	}
	if tl, err := fault.Preset(run.Case, run.FaultAt, run.FaultFor); err == nil && len(tl) > 0 {
		return tl[0].Action.String(), true
	}
	return "", false
}

// clip cuts the view to the window, so a small terminal never scrolls.
func clip(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if textWidth(l) > w {
			lines[i] = fit(l, w)
		}
	}
	return strings.Join(lines, "\n")
}
