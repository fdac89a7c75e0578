package event

import "testing"

func TestSourceNameIsTheTimelineSpelling(t *testing.T) {
	for i, want := range map[int]string{0: "source-0", 1: "source-1", 12: "source-12"} {
		if got := SourceName(i); got != want {
			t.Errorf("SourceName(%d) = %q, want %q", i, got, want)
		}
	}
}
