package load_test

import (
	"os"
	"testing"

	"p2pfault/raceguard"
)

// TestMain runs the tests under raceguard: they use testing/synctest.
func TestMain(m *testing.M) { os.Exit(raceguard.Wrap(m).Run()) }
