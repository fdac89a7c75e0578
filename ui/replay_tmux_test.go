package ui

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestReplayInTmux drives `p2pfault replay` of a stall run's events file
// in a real terminal: the keys move the replay as the help says, the
// panels follow, a fault key is refused, q exits 0. The file is a
// synthetic run (stallRun), so no cluster runs and the test takes seconds.
func TestReplayInTmux(t *testing.T) {
	bin := e2eBinary(t, "the replay's terminal test")
	dir := filepath.Dir(writeEvents(t, stallRun()))
	script := fmt.Sprintf(`NO_COLOR=1 %q replay %q; echo "p2pfault exited $?"; exec sleep 600`, bin, dir)
	pane := startPane(t, "p2pfault-replay", "replay", 140, 45, script)
	const wait = 30 * time.Second // generous: two shared cores
	has := func(parts ...string) func(string) bool {
		return func(s string) bool {
			for _, p := range parts {
				if !strings.Contains(s, p) {
					return false
				}
			}
			return true
		}
	}
	pane.waitFor("the replay to play from the start", wait, has("REPLAY ×1 ▶", "/01:25"))
	pane.send("Space")
	pane.waitFor("space to pause", wait, has("REPLAY ×1 paused"))

	// f: into the fault window (t+10.05s, 30 s after the first event).
	pane.send("f")
	pane.waitFor("f to land in the fault window", wait, has("REPLAY ×1 paused 00:30/01:25", "t+10.1s", "source-0  STALLED 30s", "phase FAULT"))
	pane.send("S-Right")
	pane.waitFor("shift+→ to step 10 s", wait, has("paused 00:40/01:25", "t+20.1s", "STALLED 20s", "in flight 21, oldest 10."))
	pane.send("Right")
	pane.waitFor("→ to step 1 s", wait, has("paused 00:41/01:25", "t+21.1s", "in flight 23, oldest 11."))
	pane.send("Left")
	pane.waitFor("← to step back 1 s", wait, has("paused 00:40/01:25", "in flight 21, oldest 10."))
	pane.send("S-Left")
	pane.waitFor("shift+← to step back 10 s", wait, has("paused 00:30/01:25", "t+10.1s"))
	pane.send("]", "]")
	pane.waitFor("]] to play at ×4", wait, has("REPLAY ×4 paused 00:30/01:25"))
	pane.send("[")
	pane.waitFor("[ to halve the speed", wait, has("REPLAY ×2 paused"))

	pane.send("s")
	pane.waitFor("a fault key to be refused", wait, has("s: replay: faults are not fired in a replay"))
	pane.send("G")
	pane.waitFor("G to go to the end", wait, has("REPLAY ×2 end 01:25/01:25", "run ended: a bound failed (exit 1)", "verdict FAIL"))
	pane.send("F")
	pane.waitFor("F to go back to the fault window", wait, has("REPLAY ×2 paused 00:30/01:25", "STALLED 30s"))
	pane.send("g")
	pane.waitFor("g to go to the start", wait, has("paused 00:00/01:25", "starting engines"))

	// Playing at ×2 the position moves on (polled, not timed).
	pane.send("Space")
	pos := regexp.MustCompile(`REPLAY ×2 ▶ 00:(\d\d)/01:25`)
	pane.waitFor("the replay to play on at ×2", wait, func(s string) bool {
		m := pos.FindStringSubmatch(s)
		return m != nil && m[1] >= "04"
	})
	pane.send("q")
	pane.waitFor("p2pfault to exit 0", wait, has("p2pfault exited 0"))
}
