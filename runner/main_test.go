package runner_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"p2pfault/internal/enginetest"
	"p2pfault/runner"
	"p2pfault/sim"
)

// superviseEnv makes the test binary a p2pfault that starts a cluster of
// fake engines in the folder it names, prints "ready" and waits to be
// killed (TestSupervisorKilledTakesEveryEngineDown).
const superviseEnv = "P2PFAULT_TEST_SUPERVISE"

func TestMain(m *testing.M) {
	if os.Getenv(sim.StandaloneEnv) == "1" {
		os.Exit(sim.RunStandalone(os.Args[1:]))
	}
	if os.Getenv(enginetest.EnvVar) == "1" {
		os.Exit(enginetest.Main(os.Args[1:]))
	}
	if dir := os.Getenv(superviseEnv); dir != "" {
		os.Exit(supervise(dir, os.Getenv(superviseEngineEnv)))
	}
	os.Exit(m.Run())
}

// superviseEngineEnv picks the supervised engines: "sim" for real
// simulated engines, else fake ones.
const superviseEngineEnv = "P2PFAULT_TEST_SUPERVISE_ENGINE"

// superviseEndEnv = "panic" makes the supervisor panic in a goroutine once
// ready instead of waiting to be SIGKILLed.
const superviseEndEnv = "P2PFAULT_TEST_SUPERVISE_END"

func supervise(dir, engine string) int {
	cfg := runner.Config{
		OutDir:       dir,
		FreePorts:    true,
		Env:          testEnv(),
		ReadyTimeout: 30 * time.Second,
	}
	if engine == "sim" {
		cfg = simConfigIn(dir)
	}
	c, err := runner.Start(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Stop(context.Background())
	fmt.Println("ready")
	if os.Getenv(superviseEndEnv) == "panic" {
		// A panic in another goroutine: the process dies without running
		// the deferred Stop, and the engines must die anyway (Pdeathsig).
		go func() { panic("supervisor: a goroutine panics mid-run") }()
	}
	// Otherwise the test SIGKILLs this process, with the same demand.
	time.Sleep(time.Hour)
	return 0
}
