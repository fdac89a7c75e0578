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
	testscript.Main(m, map[string]func(){
		"p2pfault": func() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the user sessions in testdata/script: usage errors,
// reports from events files, the headless run.
func TestScripts(t *testing.T) {
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
