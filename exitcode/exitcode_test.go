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

func TestCutShortIsEveryEndButAVerdicts(t *testing.T) {
	for code, want := range map[int]bool{OK: false, Failed: false, NotJudged: false, Usage: true, Interrupted: true, 129: true, 141: true} {
		if got := CutShort(code); got != want {
			t.Errorf("CutShort(%d) = %v, want %v", code, got, want)
		}
	}
	cases := []struct {
		ended     bool
		code      int
		untilQuit bool
		want      bool
	}{
		{false, 0, false, true},          // no end event: a crash
		{false, 0, true, true},           // ... also of a run until quit
		{true, Interrupted, false, true}, // interrupted before its planned end
		{true, Interrupted, true, false}, // a run until quit, quit
		{true, Usage, true, true},        // an error ends even a run until quit short
		{true, Failed, false, false},     // ran its course
		{true, NotJudged, false, false},  // ran its course, not judged
	}
	for _, tc := range cases {
		if got := RunCutShort(tc.ended, tc.code, tc.untilQuit); got != tc.want {
			t.Errorf("RunCutShort(%v, %d, %v) = %v, want %v", tc.ended, tc.code, tc.untilQuit, got, tc.want)
		}
	}
}
