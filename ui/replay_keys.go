package ui

import "github.com/charmbracelet/bubbles/key"

// ReplayKeyMap is the keys of a replay: the player's, and the dashboard's
// that only look (selection, log, help, quit). It implements help.KeyMap,
// so the footer and `?` show exactly these.
type ReplayKeyMap struct {
	Pause     key.Binding
	StepBack  key.Binding
	Step      key.Binding
	LongBack  key.Binding
	Long      key.Binding
	Slower    key.Binding
	Faster    key.Binding
	NextFault key.Binding
	PrevFault key.Binding
	Start     key.Binding
	End       key.Binding

	dash KeyMap // the dashboard's keys that act as they do live
}

// DefaultReplayKeyMap returns the replay's keys. Help texts are short so
// the one-line help fits 80 columns.
func DefaultReplayKeyMap() ReplayKeyMap {
	return ReplayKeyMap{
		Pause:     key.NewBinding(key.WithKeys(" "), key.WithHelp("space", "pause")),
		StepBack:  key.NewBinding(key.WithKeys("left"), key.WithHelp("←/→", "1s")),
		Step:      key.NewBinding(key.WithKeys("right"), key.WithHelp("→", "1s later")),
		LongBack:  key.NewBinding(key.WithKeys("shift+left"), key.WithHelp("shift+←/→", "10s")),
		Long:      key.NewBinding(key.WithKeys("shift+right"), key.WithHelp("shift+→", "10s later")),
		Slower:    key.NewBinding(key.WithKeys("["), key.WithHelp("[/]", "speed")),
		Faster:    key.NewBinding(key.WithKeys("]"), key.WithHelp("]", "faster")),
		NextFault: key.NewBinding(key.WithKeys("f"), key.WithHelp("f/F", "fault")),
		PrevFault: key.NewBinding(key.WithKeys("F"), key.WithHelp("F", "previous fault")),
		Start:     key.NewBinding(key.WithKeys("g"), key.WithHelp("g/G", "start/end")),
		End:       key.NewBinding(key.WithKeys("G"), key.WithHelp("G", "end")),
		dash:      DefaultKeyMap(),
	}
}

// ShortHelp is the one-line help under a replay, one entry per pair of
// keys; it fits 80 columns with `?` and `q` on it (tab is in `?`).
func (k ReplayKeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Pause, k.StepBack, k.Slower, k.NextFault, k.Start, k.dash.Help, k.dash.Quit}
}

// FullHelp is the help `?` opens in a replay.
func (k ReplayKeyMap) FullHelp() [][]key.Binding {
	long := func(b key.Binding, name, desc string) key.Binding {
		b.SetHelp(name, desc)
		return b
	}
	return [][]key.Binding{
		{
			long(k.Pause, "space", "pause/play"),
			long(k.StepBack, "←", "1s back"),
			long(k.Step, "→", "1s on"),
			long(k.LongBack, "shift+←", "10s back"),
			long(k.Long, "shift+→", "10s on"),
		},
		{
			long(k.Slower, "[", "half speed (×0.25 least)"),
			long(k.Faster, "]", "double speed (×64 most)"),
			long(k.NextFault, "f", "next fault window"),
			long(k.PrevFault, "F", "previous fault window"),
			long(k.Start, "g", "start"),
			long(k.End, "G", "end"),
		},
		{
			long(k.dash.Next, "tab", "next source"),
			long(k.dash.Select, "1-9", "source 0-8"),
			long(k.dash.Log, "l", "engine log"),
			long(k.dash.Help, "?", "close help"),
			long(k.dash.Quit, "q", "quit"),
		},
	}
}
