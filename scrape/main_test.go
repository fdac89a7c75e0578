package scrape_test

import (
	"os"
	"testing"

	"p2pfault/sim"
)

// TestMain lets the test binary act as p2pfault's `sim` when the runner
// starts simulated engines from it (sim.StandaloneEnv).
func TestMain(m *testing.M) {
	if os.Getenv(sim.StandaloneEnv) == "1" {
		os.Exit(sim.RunStandalone(os.Args[1:]))
	}
	os.Exit(m.Run())
}
