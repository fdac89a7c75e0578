package cli_test

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"p2pfault/cli"
)

// TestMain lets the test binary act as p2pfault: when the simulated
// engine's front end re-executes itself (`sim core`) or a test starts it as
// a subprocess, P2PFAULT_TEST_MAIN=1 routes it to cli.Main; testscript's
// `exec p2pfault` goes through RunMain's command map.
func TestMain(m *testing.M) {
	if os.Getenv("P2PFAULT_TEST_MAIN") == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	testscript.Main(cleaningM{m}, map[string]func(){
		"p2pfault": func() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// Parallel tests: the package's tests that call t.Parallel run side by side
// (two at a time on two cores, -parallel's default), after the others,
// which run one at a time. Most of a real-process test's time is waiting
// for its engines on the real clock, so two of them at once take about as
// long as one. A test may call it only when it shares nothing with another
// such test: its own folders, loopback ports picked free (loopbackPort, or
// --free-ports), its own engines, and no host-wide state: no firewall
// table, no SIGKILLed p2pfault (its leftovers are state another test's
// cleanup --orphans or doctor would see), no cleanup --orphans, no doctor,
// no t.Setenv. The virtual-cluster tests qualify, each in its own bubble.

// cleaningM runs the tests, then removes what they shared.
type cleaningM struct{ m *testing.M }

func (c cleaningM) Run() int {
	defer removePlainBuild()
	return c.m.Run()
}

// TestScripts runs the user sessions in testdata/script: usage errors,
// reports from events files, the headless run.
func TestScripts(t *testing.T) {
	t.Parallel() // shares nothing (parallel tests above): its runs take free ports, its cleanup reads its own folder
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			// The sim's front end re-executes the test binary for its core.
			env.Setenv("P2PFAULT_TEST_MAIN", "1")
			// A -race binary sleeps 1 s at exit by default; engines exit often.
			env.Setenv("GORACE", "atexit_sleep_ms=0")
			return nil
		},
	})
}
