package ui

import (
	"github.com/charmbracelet/bubbles/key"

	"p2pfault/fault"
)

// KeyMap is every key the dashboard answers to. It implements help.KeyMap,
// so `?` shows exactly these bindings.
type KeyMap struct {
	// Faults fire a fault kind on the selected source: one per registered
	// kind with a key, in the kinds' order.
	Faults []FaultKey
	Next   key.Binding
	Prev   key.Binding
	Select key.Binding
	// Rank picks the grain the fault keys act on, on a source of several
	// data-parallel ranks: the whole engine, then each rank in turn.
	Rank  key.Binding
	Pause key.Binding
	Log   key.Binding
	Arm   key.Binding // several arms: narrow the keys to one arm and back
	Back  key.Binding
	Help  key.Binding
	Quit  key.Binding

	// Decoder points the fault keys at a decoder instead of the selected
	// source: decoder-0, decoder-1, ..., then the source again.
	Decoder key.Binding
}

// DefaultKeyMap returns the dashboard's keys. Help texts are short so the
// one-line help fits 80 columns with `?` and `q` still on it.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Faults: faultKeys(),
		Next:   key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next")),
		Prev:   key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous")),
		Select: key.NewBinding(key.WithKeys("1", "2", "3", "4", "5", "6", "7", "8", "9"),
			key.WithHelp("1-9", "select")),
		Rank:  key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "rank")),
		Pause: key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "pause probing")),
		Log:   key.NewBinding(key.WithKeys("l"), key.WithHelp("l", "log")),
		Arm:   key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "keys: all arms")),
		Back:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Help:  key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "more")),
		Quit:  key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),

		Decoder: key.NewBinding(key.WithKeys("D"), key.WithHelp("D", "decoder")),
	}
}

// FaultKey is the key of one fault kind.
type FaultKey struct {
	Kind *fault.Kind
	key.Binding
}

// faultKeys are the registered kinds' keys, looked up when the dashboard
// is made: a kind registered with a key is on the dashboard and in `?`.
func faultKeys() []FaultKey {
	var out []FaultKey
	for _, k := range fault.Kinds() {
		if k.Key == "" {
			continue
		}
		out = append(out, FaultKey{Kind: k, Binding: key.NewBinding(key.WithKeys(k.Key), key.WithHelp(k.Key, k.Help))})
	}
	return out
}

func (k KeyMap) faultBindings(long bool) []key.Binding {
	out := make([]key.Binding, 0, len(k.Faults))
	for _, f := range k.Faults {
		if !long && f.Kind.MoreHelp {
			continue // `?` lists it; the one-line help keeps to 80 columns
		}
		b := f.Binding
		if long && f.Kind.LongHelp != "" {
			b.SetHelp(b.Help().Key, f.Kind.LongHelp)
		}
		out = append(out, b)
	}
	return out
}

// ShortHelp is the one-line help under the dashboard.
func (k KeyMap) ShortHelp() []key.Binding {
	return append(k.faultBindings(false), k.Next, k.Help, k.Quit)
}

// FullHelp is the help `?` opens: the same bindings, described in full.
func (k KeyMap) FullHelp() [][]key.Binding {
	long := func(b key.Binding, desc string) key.Binding {
		b.SetHelp(b.Help().Key, desc)
		return b
	}
	return [][]key.Binding{
		k.faultBindings(true),
		{
			long(k.Next, "next source"),
			long(k.Prev, "previous source"),
			long(k.Select, "source 0-8"),
			long(k.Rank, "whole engine / rank r"),
			long(k.Pause, "pause/resume probing"),
		},
		{
			long(k.Log, "engine log"),
			long(k.Decoder, "decoder N / source"),
			long(k.Help, "close help"),
			long(k.Quit, "quit, stop the run"),
		},
	}
}
