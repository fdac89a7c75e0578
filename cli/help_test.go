package cli_test

import (
	"io"
	"strings"
	"testing"

	"p2pfault/cli"
	"p2pfault/event"
	"p2pfault/fault"
)

// TestHelpListsANewKind: every help text that lists fault kinds reads
// the registry. A kind registered as a seed case that takes "for" (in
// this test, with no other file edited) appears in the root's and the
// slice's description, among run's cases and in the nemesis' length
// flag, and the root's paragraph still fits 84 columns.
func TestHelpListsANewKind(t *testing.T) {
	t.Cleanup(fault.Register(&fault.Kind{
		Name: "quake", Help: "quake", Order: 98,
		TakesFor: true, Leaves: event.CondStalled, Opens: true, Ending: fault.EndsAfterFor, Case: fault.SeedCase,
		Act: func(*fault.Fire) error { return nil },
	}))
	root := cli.NewRoot(strings.NewReader(""), io.Discard, io.Discard)
	sub := func(name string) string {
		c, _, err := root.Find([]string{name})
		if err != nil || c.Name() != name {
			t.Fatalf("no %s command: %v", name, err)
		}
		return c.Long
	}
	run, _, _ := root.Find([]string{"run"})
	slice, _, _ := root.Find([]string{"slice"})
	texts := map[string]string{
		"the root's description":  root.Long,
		"the slice's description": sub("slice"),
		"the run's description":   sub("run"),
		"run --case":              run.Flags().Lookup("case").Usage,
		"run --nemesis-length":    run.Flags().Lookup("nemesis-length").Usage,
		"slice --cases":           slice.Flags().Lookup("cases").Usage,
		"slice --cases' default":  slice.Flags().Lookup("cases").DefValue,
	}
	for where, text := range texts {
		if !strings.Contains(text, "quake") {
			t.Errorf("%s does not list the new kind quake:\n%s", where, text)
		}
	}
	if !strings.Contains(strings.ReplaceAll(root.Long, "\n", " "), "(stall, kill, remove, quake)") {
		t.Errorf("the root's description lists the seed's cases as %q", root.Long)
	}
	if !strings.Contains(sub("slice"), "Run stall, kill, remove and quake on source-0") {
		t.Errorf("the slice's description lists its cases as %q", sub("slice"))
	}
	for _, line := range strings.Split(root.Long, "\n") {
		if len(line) > 84 {
			t.Errorf("the root's description has a line over 84 columns: %q", line)
		}
	}
}
