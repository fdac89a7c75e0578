// Package sessiontest holds what tests of several packages read of a
// process through package session.
package sessiontest

import (
	"testing"

	"p2pfault/runner/session"
)

// State is pid's /proc state letter ('T' stopped, 'S' sleeping, ...); it
// fails the test when pid cannot be read.
func State(t testing.TB, pid int) byte {
	t.Helper()
	st, err := session.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.State
}
