package ui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"p2pfault/check"
	"p2pfault/event"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"p2pfault/fault"
)

// The layout of a run of several arms (experiment.Group): one header for
// the shared timeline, then per arm its source panels, process table and
// verdict, side by side on a wide terminal and stacked on a narrow one, a
// difference line for the selected source, the merged event log and the
// keys. Each arm's parts are drawn by the one-arm panels over that arm's
// state (forArm), so they look and behave as in a one-arm run.

// sideBySideMin is the least width at which arms go side by side.
const sideBySideMin = 140

// multi reports whether the stream holds more than one arm.
func (a *arms) multi() bool { return len(a.order) > 1 }

// forArm is the Model as it draws and judges arm's parts: the same Model
// over that arm's state and pixel scratch.
func (m Model) forArm(arm string) Model {
	mm := m
	if st, ok := m.arms.by[arm]; ok {
		mm.st = st
	}
	if arm != m.arms.order[0] {
		mm.scratch = m.scratch.arm(arm)
	}
	return mm
}

// arm returns the scratch of an arm other than the first.
func (r *renderScratch) arm(name string) *renderScratch {
	if r.perArm == nil {
		r.perArm = map[string]*renderScratch{}
	}
	s, ok := r.perArm[name]
	if !ok {
		s = &renderScratch{}
		r.perArm[name] = s
	}
	return s
}

// keyArms are the arms the fault keys act on: every arm, or the one `a`
// narrowed them to.
func (m Model) keyArms() []string {
	if m.armSel > 0 && m.armSel <= len(m.arms.order) {
		return m.arms.order[m.armSel-1 : m.armSel]
	}
	return m.arms.order
}

// armMode is what the footer says the keys act on.
func (m Model) armMode() string {
	if m.armSel > 0 && m.armSel <= len(m.arms.order) {
		return "keys: " + m.arms.order[m.armSel-1] + " only"
	}
	return "keys: all arms"
}

// armKey handles the keys that differ when several arms run; ok is false
// for the keys that act as in a one-arm run.
func (m Model) armKey(msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	k := m.keys
	if m.mode == modeLog {
		if !key.Matches(msg, k.Next) {
			return m, nil, false
		}
		mm, cmd := m.openLog(m.nextArmEngine(m.logEngine))
		return mm, cmd, true
	}
	switch {
	case key.Matches(msg, k.Arm):
		m.armSel = (m.armSel + 1) % (len(m.arms.order) + 1)
		m.st.addLog(m.nowT(), levelInfo, "%s", m.armMode())
		return m, nil, true
	case key.Matches(msg, k.Log):
		mm, cmd := m.openLog(m.keyArms()[0] + "/" + event.SourceName(m.selected))
		return mm, cmd, true
	}
	for _, f := range k.Faults {
		if key.Matches(msg, f.Binding) {
			mm, cmd := m.fireArms(msg.String(), f.Kind)
			return mm, cmd, true
		}
	}
	return m, nil, false
}

// fireArms fires kind on the selected source of every arm the keys act
// on, or, when any of them has nothing to fire on, on none (an A/B
// comparison needs the same fault on both): each is logged with its arm.
// The run's own check refuses on none the same way (Group.Fire), its
// refusals logged with their arms when the command returns.
func (m Model) fireArms(keyName string, k *fault.Kind) (Model, tea.Cmd) {
	act := m.action(k)
	targets := m.keyArms()
	refused := false
	for _, a := range targets {
		if why := m.forArm(a).refusal(act); why != "" {
			m.arms.by[a].addLog(m.nowT(), levelWarn, "%s: %s", keyName, why)
			refused = true
		}
	}
	if refused {
		return m, nil
	}
	if len(targets) == len(m.arms.order) {
		return m, controllerAction(m.ctrl, keyName, act)
	}
	ac, ok := m.ctrl.(ArmController)
	if !ok {
		m.st.addLog(m.nowT(), levelWarn, "%s: this run cannot fire on one arm", keyName)
		return m, nil
	}
	return m, armAction(ac, targets[0], keyName, act)
}

// nextArmEngine cycles the full-screen log through every arm's engines,
// named ARM/ENGINE.
func (m Model) nextArmEngine(cur string) string {
	var names []string
	for _, a := range m.arms.order {
		for _, e := range m.arms.by[a].engineOrder() {
			names = append(names, a+"/"+e.info.Name)
		}
	}
	return cycleNext(names, cur)
}

// armsKeys is the footer of a several-arm run: the one-arm keys and `a`,
// whose help says which arms the keys act on.
type armsKeys struct {
	k    KeyMap
	mode string
}

func (a armsKeys) arm() key.Binding {
	b := a.k.Arm
	b.SetHelp(b.Help().Key, a.mode)
	return b
}

func (a armsKeys) ShortHelp() []key.Binding {
	return append(a.k.faultBindings(false), a.arm(), a.k.Next, a.k.Help, a.k.Quit)
}

func (a armsKeys) FullHelp() [][]key.Binding {
	full := a.k.FullHelp()
	return append(full, []key.Binding{a.arm()})
}

// armsView draws a several-arm run in w×h.
func (m Model) armsView(w, h int) string {
	for _, a := range m.arms.order {
		if !m.arms.by[a].up() {
			// Start-up is shown for the first arm not up yet: its engines,
			// or why they did not come up.
			return m.forArm(a).startupView(w, h)
		}
	}
	now := m.opts.Now()
	nowT := m.st.nowT(now)

	run := m.st.run
	if run != nil {
		r := *run
		r.Arm = strings.Join(m.arms.order, " | ")
		run = &r
	}
	ended := true
	for _, a := range m.arms.order {
		ended = ended && m.arms.by[a].ended
	}
	head := m.header(run, ended, now, w)
	hv := m.help.View(m.footer(armsKeys{k: m.keys, mode: m.armMode()}))
	banner := ""
	if ended {
		banner = m.armsBanner()
	}

	avail := h - lipgloss.Height(head) - lipgloss.Height(hv) - 1 // the difference line
	if banner != "" {
		avail--
	}
	body, blocksH := m.armBlocks(w, max(avail-logMin, 0), nowT)
	logH := max(avail-blocksH, 0)

	parts := []string{head}
	if blocksH > 0 {
		parts = append(parts, body)
	}
	parts = append(parts, m.diffLine(w, nowT))
	if logH > 0 {
		parts = append(parts, eventLog{entries: m.mergedLog(logH), styles: m.styles}.Render(w, logH))
	}
	if banner != "" {
		parts = append(parts, banner)
	}
	parts = append(parts, hv)
	return strings.Join(parts, "\n")
}

// armBlocks draws every arm's block in at most h lines: side by side on a
// wide terminal, stacked on a narrow one, each no taller than it wants.
// It returns them and the lines they took.
func (m Model) armBlocks(w, h int, nowT time.Duration) (string, int) {
	n := len(m.arms.order)
	if w >= sideBySideMin {
		want := 0
		for _, a := range m.arms.order {
			want = max(want, m.forArm(a).armWant(w/n))
		}
		h = min(h, want)
		var cols []string
		used := 0
		for i, a := range m.arms.order {
			cw := w / n
			if i == n-1 {
				cw = w - used
			}
			used += cw
			if i < n-1 {
				// A blank column after each block but the last, so a line
				// that fills its block (a process table with its LINK
				// column, a checks line) does not run into the next arm's.
				cols = append(cols, m.forArm(a).armBlock(cw-1, h, nowT), blankColumn(h))
				continue
			}
			cols = append(cols, m.forArm(a).armBlock(cw, h, nowT))
		}
		return lipgloss.JoinHorizontal(lipgloss.Top, cols...), h
	}
	each := h / n
	want := 0
	for _, a := range m.arms.order {
		want = max(want, m.forArm(a).armWant(w))
	}
	each = min(each, want)
	var rows []string
	for _, a := range m.arms.order {
		rows = append(rows, m.forArm(a).armBlock(w, each, nowT))
	}
	return strings.Join(rows, "\n"), each * n
}

// blankColumn is h lines of one space.
func blankColumn(h int) string {
	return strings.TrimSuffix(strings.Repeat(" \n", max(h, 1)), "\n")
}

// armsBanner is the end of a several-arm run: each arm's outcome.
func (m Model) armsBanner() string {
	s := m.styles
	var parts []string
	failed := false
	for _, a := range m.arms.order {
		st := m.arms.by[a]
		word := "pass"
		switch {
		case st.exitCode == 1:
			word = "FAIL"
		case st.exitCode != 0:
			word = "error"
		}
		failed = failed || st.exitCode != 0
		parts = append(parts, fmt.Sprintf("%s %s (exit %d)", a, word, st.exitCode))
	}
	style := s.Pass
	if failed {
		style = s.Fail
	}
	return style.Render("run ended: " + strings.Join(parts, " · ") + " · press q to quit")
}

// armParts are the heights of an arm's block: its title, panels, process
// table (1 = the one-line summary) and checks or verdict.
type armParts struct {
	cols, rows              int
	panels, procs, verdicts int
}

// armLayout fits an arm's parts into w×h, giving way in this order when
// space is short: the process table to one line, then the verdict table
// to its checks, then to one line.
func (m Model) armLayout(w, h int) armParts {
	st := m.st
	n := max(1, len(st.sources))
	p := armParts{cols: min(n, max(1, w/38))}
	p.rows = (n + p.cols - 1) / p.cols
	p.procs = 1 + max(1, len(st.engineOrder()))
	p.verdicts = 1
	final := st.final && st.verdict != nil
	if final {
		p.verdicts = verdictTable{verdict: st.verdict}.Height()
	}
	rest := func() int { return h - 1 - p.procs - p.verdicts }
	if rest() < p.rows*panelMin {
		p.procs = 1
	}
	if rest() < p.rows*panelMin && final {
		p.verdicts = min(p.verdicts, 1+len(st.verdict.Checks))
	}
	if rest() < p.rows*panelMin {
		p.verdicts = 1
	}
	p.panels = max(min(rest(), p.rows*panelMax), 0)
	return p
}

// armWant is the height an arm's block would take with room to spare.
func (m Model) armWant(w int) int {
	p := m.armLayout(w, 1000)
	return 1 + p.panels + p.procs + p.verdicts
}

// armBlock draws one arm (m is forArm's): title, source panels, process
// table, checks or verdict, exactly w×h.
func (m Model) armBlock(w, h int, nowT time.Duration) string {
	if h <= 0 {
		return ""
	}
	s := m.styles
	st := m.st
	arm := "-"
	if st.run != nil {
		arm = st.run.Arm
	}
	p := m.armLayout(w, h)
	title := s.Title.Render("▌" + arm)
	if targets := m.keyArms(); len(targets) == 1 && targets[0] == arm {
		title += " " + s.Selected.Render("◀ keys")
	}
	parts := []string{fit(title+"  "+m.armStatus(), w)}
	if p.panels > 0 {
		parts = append(parts, m.renderSources(w, p.panels, p.cols, p.rows, 0, nowT))
	}
	engines := st.engineOrder()
	if p.procs > 1 {
		parts = append(parts, procTable{engines: engines, links: st.links, styles: s}.Render(w, p.procs))
	} else {
		parts = append(parts, procLine(engines, s, w))
	}
	switch {
	case st.final && st.verdict != nil && p.verdicts > 1:
		parts = append(parts, verdictTable{verdict: st.verdict, run: st.run, styles: s, cut: st.cutShort()}.Render(w, p.verdicts))
	case st.final && st.verdict != nil:
		parts = append(parts, verdictLine(st.verdict, s, w))
	default:
		parts = append(parts, checksPanel{verdict: st.verdict, styles: s}.Render(w, 1))
	}
	return block(strings.Split(strings.Join(parts, "\n"), "\n"), w, h)
}

// armStatus is the right of an arm's title: its phase, or its outcome.
func (m Model) armStatus() string {
	s := m.styles
	st := m.st
	switch {
	case st.final && st.verdict != nil && st.cutShort() && !check.Broken(*st.verdict):
		return s.Dim.Render("INTERRUPTED") + s.Dim.Render(m.faultedFigures())
	case st.final && st.verdict != nil && st.verdict.Passed:
		return s.Pass.Render("PASS") + s.Dim.Render(m.faultedFigures())
	case st.final && st.verdict != nil:
		return s.Fail.Render("FAIL") + s.Dim.Render(m.faultedFigures())
	case st.ended:
		return s.Dim.Render(fmt.Sprintf("ended (exit %d)", st.exitCode))
	}
	return s.Dim.Render(string(st.phase))
}

func (m Model) faultedFigures() string {
	f := m.st.verdict.Summary.Faulted
	return fmt.Sprintf(" · faulted n %d, p50 %s, max %s", f.N, fmtSeconds(f.P50), fmtSeconds(f.Max))
}

// diffLine sets the arms side by side for the selected source: pulls in
// flight now, p50 and hit rate over the rolling window.
func (m Model) diffLine(w int, nowT time.Duration) string {
	s := m.styles
	i := m.selected
	var parts []string
	for _, a := range m.arms.order {
		mm := m.forArm(a)
		if i >= len(mm.st.sources) {
			parts = append(parts, a+": no "+event.SourceName(i))
			continue
		}
		st := mm.sourcePanel(i, mm.st.nowT(m.opts.Now())).stats
		p50, hits := "–", "–"
		if st.n > 0 {
			p50 = fmtLatency(st.p50)
			hits = fmtPercent(float64(st.hits) / float64(st.n))
		}
		parts = append(parts, fmt.Sprintf("%s: in flight %d, p50 %s, hits %s", a, mm.st.inflightCount(i, nowT), p50, hits))
	}
	_ = nowT
	body := strings.Join(parts, "  |  ")
	full := s.Selected.Render(event.SourceName(i)) + s.Dim.Render(" last "+fmtSpan(m.recent())+"  ") + body
	if lipgloss.Width(full) > w {
		full = body // the figures matter more than their label
	}
	return fit(full, w)
}

// mergedLog is the last n entries of every arm's event log, in time order,
// each prefixed with its arm.
func (m Model) mergedLog(n int) []logEntry {
	width := 0
	for _, a := range m.arms.order {
		width = max(width, len(a))
	}
	var all []logEntry
	for _, a := range m.arms.order {
		for _, e := range m.arms.by[a].log.Last(n) {
			e.text = fmt.Sprintf("%-*s  %s", width, a, e.text)
			all = append(all, e)
		}
	}
	sort.SliceStable(all, func(x, y int) bool { return all[x].at < all[y].at })
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}
