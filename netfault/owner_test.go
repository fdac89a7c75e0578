package netfault

import (
	"strings"
	"testing"

	"p2pfault/owner"
)

// TestATablesNameCarriesItsOwner: a run id made by OwnedRunID gives a
// table whose name TableOwner reads the owner back from, whatever the
// run's name holds and however long it is (cut to a valid id); names made
// before tables carried their owner, or by anyone else, carry none.
func TestATablesNameCarriesItsOwner(t *testing.T) {
	for _, o := range []owner.ID{{Pid: 4242, StartTicks: 981234, NS: 4026531836}, {Pid: 4242, StartTicks: 981234}} {
		tableCarriesOwner(t, o)
	}
	o := owner.ID{Pid: 4242, StartTicks: 981234}
	for _, name := range []string{"main-partition", "+ #64501-loss", strings.Repeat("a", 300) + "-stall"} {
		id := OwnedRunID(name, o)
		if !runIDRe.MatchString(id) {
			t.Errorf("OwnedRunID(%q) = %q: not a valid run id", name, id)
		}
		if got, ok := TableOwner(TableName(id)); !ok || got != o {
			t.Errorf("TableOwner(%s) = %v, %v; want %v", TableName(id), got, ok, o)
		}
	}
	if a, b := OwnedRunID("main-stall", o), OwnedRunID("main-stall", o); a == b {
		t.Errorf("two run ids of one owner and name are both %q", a)
	}
	for _, name := range []string{
		"p2pfault_main-partition-15686-160a31",        // before tables named their owner
		"p2pfault_test-77-TestSomething",              // a test's
		"other_main-partition-4242.981234-abcdef",     // not p2pfault's
		"p2pfault_main-partition-4242.x1-abcdef",      // no start time
		"p2pfault_main-partition-04242.981234-abcdef", // not a pid
	} {
		if got, ok := TableOwner(name); ok {
			t.Errorf("TableOwner(%s) = %v, want none", name, got)
		}
	}
	if id := OwnedRunID("main-stall", owner.ID{Pid: 7}); strings.Contains(id, ".") {
		t.Errorf("an owner without a start time gave %q, which names it", id)
	}
}

// tableCarriesOwner: OwnedRunID's name gives o back, PID namespace and all.
func tableCarriesOwner(t *testing.T, o owner.ID) {
	t.Helper()
	id := OwnedRunID("main-partition", o)
	if got, ok := TableOwner(TableName(id)); !ok || got != o {
		t.Errorf("TableOwner(%s) = %v, %v; want %v", TableName(id), got, ok, o)
	}
}
