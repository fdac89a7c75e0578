package runner_test

import (
	"net"
	"strconv"
	"sync"
	"testing"

	"p2pfault/event"
)

// TestAFreePortTakenBeforeItsBindIsPickedAgain: a free port is picked free
// but bound only after the model loads; when another process binds it
// meanwhile (here this test, as soon as the engine is said to be starting
// on it, a second before its bind), the engine fails to bind and the
// cluster is started again on new ports rather than failing the run.
func TestAFreePortTakenBeforeItsBindIsPickedAgain(t *testing.T) {
	cfg := simConfig(t)
	cfg.Sources = 1
	cfg.SourceArgs = []string{"--sim-startup-delay=20s"} // 1 s at the config's time scale
	var mu sync.Mutex
	var stolen int
	var held []net.Listener
	t.Cleanup(func() {
		for _, l := range held {
			_ = l.Close()
		}
	})
	cfg.OnChange = func(c event.EngineInfo) {
		mu.Lock()
		defer mu.Unlock()
		if stolen != 0 || c.Name != "source-0" || c.State != event.StateStarting || c.HTTPPort == 0 {
			return
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(c.HTTPPort))
		if err != nil {
			t.Errorf("take source-0's port %d: %v", c.HTTPPort, err)
			return
		}
		stolen, held = c.HTTPPort, append(held, l)
	}
	c, _ := startCluster(t, cfg)
	mu.Lock()
	defer mu.Unlock()
	if stolen == 0 {
		t.Fatal("source-0 was never said to be starting on an HTTP port: nothing was taken")
	}
	src, err := c.Source(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := src.HTTPPort(); got == stolen {
		t.Errorf("source-0 serves on %d, the port taken before its bind", got)
	}
}
