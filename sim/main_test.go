package sim

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as p2pfault when P2PFAULT_TEST_MAIN=1,
// so tests start real engines (front end and core) without building the
// binary: the front end re-executes os.Executable(), i.e. this binary.
func TestMain(m *testing.M) {
	if os.Getenv(StandaloneEnv) == "1" {
		os.Exit(RunStandalone(os.Args[1:]))
	}
	os.Exit(m.Run())
}
