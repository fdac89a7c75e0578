package event

import "time"

// KindWindowVerdict is a fault window's verdict once nothing to come can
// change it (its span is over, none of its pulls in flight): sent once per
// window, as the run goes, so a long run's live verdicts need carry only
// the windows not settled yet: WindowVerdict.
const KindWindowVerdict Kind = "window_verdict"

// WindowVerdict is one fault window judged on its own: a run with many
// faults (a nemesis) gets one per window, in start order, in its
// verdict's Windows. A pull is judged in the window whose span holds its
// start (the window and its recovery, up to the next window's start), so a
// pull that overlaps two windows is judged in the first.
type WindowVerdict struct {
	Index    int           `json:"index"` // 1, 2, ... in start order
	Kind     string        `json:"kind"`  // the fault kind that opened it
	Source   int           `json:"source"`
	Start    time.Duration `json:"start_ns"`
	End      time.Duration `json:"end_ns"` // 0 while open
	Recovers bool          `json:"recovers"`
	Passed   bool          `json:"passed"`
	// NotJudged is why the window could not be judged ("": it was): its
	// source had stopped hitting before the fault fired. Such a window did
	// not pass and did not fail; its checks are kept for the record.
	NotJudged string `json:"not_judged,omitempty"`
	// Settled: nothing that is still to come can change this verdict (its
	// span is over and none of its pulls is in flight).
	Settled bool     `json:"settled"`
	Checks  []Result `json:"checks"` // the checks that apply to its kind
	Times   Times    `json:"times"`
	Summary Summary  `json:"summary"`
}

// KindSummary is what the windows of one fault kind came to: how many,
// how many passed and failed, and the worst detect and recover times
// (nil when no window of the kind got one; a window that never detected
// or recovered is counted in NotDetected, NotRecovered, and is worse than
// any time).
type KindSummary struct {
	Kind          string   `json:"kind"`
	Count         int      `json:"count"`
	Passed        int      `json:"passed"`
	Failed        int      `json:"failed"`
	NotJudged     int      `json:"not_judged,omitempty"` // invalid windows: neither passed nor failed
	WorstDetectS  *float64 `json:"worst_detect_s"`
	NotDetected   int      `json:"not_detected"`
	WorstRecoverS *float64 `json:"worst_recover_s"`
	NotRecovered  int      `json:"not_recovered"` // of the windows that recover (not remove's)
}
