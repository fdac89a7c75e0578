package probe_test

import (
	"os"
	"testing"

	"p2pfault/sim"
)

// TestMain lets the test binary act as p2pfault when P2PFAULT_TEST_MAIN=1,
// so tests and benchmarks start real simulated engines without building the
// binary; the sim front end re-executes this binary for its engine core.
func TestMain(m *testing.M) {
	if os.Getenv(sim.StandaloneEnv) == "1" {
		os.Exit(sim.RunStandalone(os.Args[1:]))
	}
	os.Exit(m.Run())
}
