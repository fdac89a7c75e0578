package ui

import (
	"strings"
	"testing"
	"time"
)

// TestReplayShowsWrongTexts: a run's pulls that answered another text
// than their source's come back from its events file (content, both
// texts) and the replay shows what the live dashboard showed: at the end
// the source's wrong 3 and the failed content_matches, the same frame as
// live; stepped back before the kill, no wrong count (the Model rebuilt
// from the first event does not keep the later ones).
func TestReplayShowsWrongTexts(t *testing.T) {
	const w, h = 160, 48
	evs := sceneWrongText().events
	r := fromFile(t, writeEvents(t, evs), w, h)

	r.seek(wallAt(16 * time.Second))
	end := r.View()
	assertSameFrame(t, liveFrame(t, evs, 16*time.Second, w, h), end, r.tag())
	if !strings.Contains(end, "wrong 3") {
		t.Errorf("replay at 16s does not count the 3 wrong texts:\n%s", end)
	}
	if !strings.Contains(end, "✗ content_matches") {
		t.Errorf("replay at 16s does not show content_matches failing:\n%s", end)
	}

	r.seek(wallAt(9 * time.Second))
	if before := r.View(); strings.Contains(before, "wrong ") {
		t.Errorf("replay stepped back to 9s, before any wrong text, still counts one:\n%s", before)
	}
}
