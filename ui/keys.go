package ui

import "github.com/charmbracelet/bubbles/key"

// KeyMap is every key the dashboard answers to. It implements help.KeyMap,
// so `?` shows exactly these bindings.
type KeyMap struct {
	Stall   key.Binding
	Resume  key.Binding
	Kill    key.Binding
	Remove  key.Binding
	Restore key.Binding
	Next    key.Binding
	Prev    key.Binding
	Select  key.Binding
	Pause   key.Binding
	Log     key.Binding
	Back    key.Binding
	Help    key.Binding
	Quit    key.Binding
}

// DefaultKeyMap returns the dashboard's keys. Help texts are short so the
// one-line help fits 80 columns with `?` and `q` still on it.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Stall:   key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "stall")),
		Resume:  key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "resume")),
		Kill:    key.NewBinding(key.WithKeys("k"), key.WithHelp("k", "kill")),
		Remove:  key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "remove")),
		Restore: key.NewBinding(key.WithKeys("u"), key.WithHelp("u", "restore")),
		Next:    key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next")),
		Prev:    key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous")),
		Select: key.NewBinding(key.WithKeys("1", "2", "3", "4", "5", "6", "7", "8", "9"),
			key.WithHelp("1-9", "select")),
		Pause: key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "pause probing")),
		Log:   key.NewBinding(key.WithKeys("l"), key.WithHelp("l", "log")),
		Back:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Help:  key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "more")),
		Quit:  key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}

// ShortHelp is the one-line help under the dashboard.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Stall, k.Resume, k.Kill, k.Remove, k.Restore, k.Next, k.Help, k.Quit}
}

// FullHelp is the help `?` opens: the same bindings, described in full.
func (k KeyMap) FullHelp() [][]key.Binding {
	long := func(b key.Binding, desc string) key.Binding {
		b.SetHelp(b.Help().Key, desc)
		return b
	}
	return [][]key.Binding{
		{
			long(k.Stall, "stall (SIGSTOP)"),
			long(k.Resume, "resume early"),
			long(k.Kill, "kill, restart"),
			long(k.Remove, "remove (SIGTERM)"),
			long(k.Restore, "restore removed"),
		},
		{
			long(k.Next, "next source"),
			long(k.Prev, "previous source"),
			long(k.Select, "source 0-8"),
			long(k.Pause, "pause/resume probing"),
		},
		{
			long(k.Log, "engine log"),
			long(k.Help, "close help"),
			long(k.Quit, "quit, stop the run"),
		},
	}
}

// logKeys are the bindings in force in the full-screen log.
type logKeys struct{ k KeyMap }

func (l logKeys) ShortHelp() []key.Binding {
	next := l.k.Next
	next.SetHelp("tab", "next engine")
	return []key.Binding{l.k.Back, next, l.k.Quit}
}

func (l logKeys) FullHelp() [][]key.Binding { return [][]key.Binding{l.ShortHelp()} }

// startupKeys are the bindings in force while engines come up: faults
// need a cluster.
type startupKeys struct{ k KeyMap }

func (s startupKeys) ShortHelp() []key.Binding { return []key.Binding{s.k.Log, s.k.Quit} }

func (s startupKeys) FullHelp() [][]key.Binding { return [][]key.Binding{s.ShortHelp()} }
