package ui

import (
	"io"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"p2pfault/event"
)

// TestProcTableShowsWhatAnAttachedClusterKnows: engines of an attached
// cluster add URL and /HEALTH columns: a local engine with its pid and
// session, a remote one with dashes where /proc cannot see it. Launched
// engines (no URL) keep the table as it was.
func TestProcTableShowsWhatAnAttachedClusterKnows(t *testing.T) {
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	s := NewStyles(r)
	local := &engineState{info: event.EngineInfo{Name: "source-0", Role: event.RoleSource, State: event.StateStopped,
		Pid: 4242, Sid: 4240, Members: []int{4240, 4242}, HTTPPort: 8100, P2PPort: 7777,
		URL: "http://127.0.0.1:8100", Health: "no answer in 1s"}}
	remote := &engineState{info: event.EngineInfo{Name: "prefill-1", Role: event.RoleSource, Index: 1, State: event.StateReady,
		HTTPPort: 8100, P2PPort: 7777, URL: "http://prefill-1.llm-d.svc:8100", Health: "ok"}}
	out := procTable{engines: []*engineState{local, remote}, styles: &s}.Render(160, 5)
	lines := strings.Split(out, "\n")
	for _, want := range []struct {
		line  int
		words []string
	}{
		{0, []string{"ENGINE", "PID", "SID", "STATE", "URL", "/HEALTH"}},
		{1, []string{"source-0", "4242", "4240", "stopped", "http://127.0.0.1:8100", "no answer in 1s"}},
		{2, []string{"prefill-1", "-", "ready", "http://prefill-1.llm-d.svc:8100", "ok"}},
	} {
		for _, w := range want.words {
			if !strings.Contains(lines[want.line], w) {
				t.Errorf("line %d %q has no %q", want.line, lines[want.line], w)
			}
		}
	}
	launched := procTable{engines: []*engineState{{info: event.EngineInfo{Name: "source-0", Pid: 1}}}, styles: &s}.Render(160, 3)
	if strings.Contains(launched, "URL") {
		t.Errorf("a launched engine's table has a URL column:\n%s", launched)
	}
}
