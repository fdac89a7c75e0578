// Package exitcode maps p2pfault's errors to the process exit codes of the
// design: 0 every bound held, 1 a bound failed, 2 usage or setup error,
// 3 could not be judged, 130 interrupted.
package exitcode

import (
	"errors"
	"fmt"
)

const (
	OK     = 0
	Failed = 1
	Usage  = 2
	// NotJudged: the run could not be judged. The cluster started, but its
	// P2P tier never engaged (the warm-up gate), or a source had stopped
	// hitting before its fault fired (that window is invalid), or a check
	// failed only where p2pfault itself lagged (check/lag.go). A failed
	// bound takes precedence: a run with a failed window and an invalid
	// one exits 1.
	NotJudged   = 3
	Interrupted = 130
)

// Error carries the exit code an error should end the process with.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Usagef is a usage or setup error (exit 2): bad flag, bad value, port in
// use, engine failed to start. The message must name the bad thing.
func Usagef(format string, args ...any) error {
	return &Error{Code: Usage, Err: fmt.Errorf(format, args...)}
}

// AsUsage marks err as a usage or setup error, keeping its message.
func AsUsage(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: Usage, Err: err}
}

// NotJudgedf is a run that could not be judged (exit 3): the message
// names what kept it from being judged and what to fix.
func NotJudgedf(format string, args ...any) error {
	return &Error{Code: NotJudged, Err: fmt.Errorf(format, args...)}
}

// ErrNotJudged is returned by a run that completed with no bound failed
// but a fault window that could not be judged (exit 3).
var ErrNotJudged = &Error{Code: NotJudged, Err: errors.New("a fault window could not be judged")}

// ErrBoundFailed is returned by a run whose checks did not all hold (exit 1).
var ErrBoundFailed = &Error{Code: Failed, Err: errors.New("a bound failed")}

// ErrInterrupted is returned when the user interrupted the run (exit 130).
var ErrInterrupted = &Error{Code: Interrupted, Err: errors.New("interrupted")}

// Code returns the exit code for err: 0 for nil, the code of the outermost
// *Error in its chain, else 2 (an unclassified error is a setup error).
func Code(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Usage
}

// CutShort reports whether a run whose end event carries code ended
// before its planned end: interrupted (130: a signal, the dashboard's q),
// ended by an error (2: an internal error, a log that could not be
// written), or by any other way out with a code of its own (a signal's
// 128+n). Only a verdict's codes, 0, 1 and 3, end a run that ran its
// course. It is the one place that says which end is which: every report
// reads a run's end through it.
func CutShort(code int) bool {
	switch code {
	case OK, Failed, NotJudged:
		return false
	}
	return true
}

// RunCutShort reports whether a run was cut short, as its events tell
// it: ended is false when they end without an end event (a crash, a
// SIGKILL), code is the end event's exit code, and untilQuit says the run
// had no planned end (the dashboard's, until q), which an interruption
// ends as planned.
func RunCutShort(ended bool, code int, untilQuit bool) bool {
	if !ended {
		return true
	}
	if untilQuit && code == Interrupted {
		return false
	}
	return CutShort(code)
}
