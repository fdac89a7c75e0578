package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

func TestCodeFollowsTheOutermostClassifiedError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil is success", nil, OK},
		{"a bound failed", ErrBoundFailed, Failed},
		{"interrupted", ErrInterrupted, Interrupted},
		{"not judged", ErrNotJudged, NotJudged},
		{"a gate that names its cause", fmt.Errorf("warm-up: %w", NotJudgedf("source 0: hash seed mismatch")), NotJudged},
		{"usage", Usagef("--time-scale %v: want a positive number", -1), Usage},
		{"wrapped usage keeps its code", fmt.Errorf("run: %w", AsUsage(errors.New("port 8100 in use"))), Usage},
		{"wrapped interruption keeps its code", fmt.Errorf("slice: %w", ErrInterrupted), Interrupted},
		{"an unclassified error is a setup error", errors.New("engine failed to start"), Usage},
		{"explicit code", &Error{Code: Failed, Err: errors.New("core died")}, Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Code(tt.err); got != tt.want {
				t.Fatalf("Code(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
	if AsUsage(nil) != nil {
		t.Fatal("AsUsage(nil) is not nil")
	}
	if got := Usagef("bad %q", "x").Error(); got != `bad "x"` {
		t.Fatalf("message %q", got)
	}
}
