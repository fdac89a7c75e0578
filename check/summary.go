package check

import (
	"fmt"
	"slices"
	"strings"

	"p2pfault/event"
)

// aggregate is each check judged in every window, in the order a window
// lists them: it holds when it held in every window it applies to; its
// detail names the windows it failed in.
func aggregate(windows []event.WindowVerdict) []event.Result {
	var names []string
	for _, w := range windows {
		for _, c := range windowOnly(w.Checks) {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	var out []event.Result
	for _, name := range names {
		r := event.Result{Name: name, Passed: true, Empty: true}
		var failed []string
		n := 0
		for _, w := range windows {
			for _, c := range w.Checks {
				if c.Name != name {
					continue
				}
				n++
				r.Pending += c.Pending
				r.Empty = r.Empty && c.Empty
				if !c.Passed {
					r.Passed = false
					failed = append(failed, fmt.Sprintf("window %d (%s %s at %s): %s", w.Index, w.Kind, event.SourceName(w.Source), secs1(w.Start), c.Detail))
				}
			}
		}
		if r.Passed {
			r.Empty = false
			r.Detail = fmt.Sprintf("held in all %d windows", n)
		} else {
			r.Detail = fmt.Sprintf("failed in %d of %d windows: %s", len(failed), n, strings.Join(failed[:min(len(failed), 3)], "; "))
			if len(failed) > 3 {
				r.Detail += fmt.Sprintf("; and %d more", len(failed)-3)
			}
		}
		out = append(out, r)
	}
	return out
}

// judgedOnly is windows less those that could not be judged.
func judgedOnly(windows []event.WindowVerdict) []event.WindowVerdict {
	return slices.DeleteFunc(slices.Clone(windows), func(w event.WindowVerdict) bool { return w.NotJudged != "" })
}

// notJudged names each window of windows that could not be judged, and why.
func notJudged(windows []event.WindowVerdict) []string {
	var out []string
	for _, w := range windows {
		if w.NotJudged != "" {
			out = append(out, fmt.Sprintf("window %d (%s %s at %s): %s", w.Index, w.Kind, event.SourceName(w.Source), secs1(w.Start), w.NotJudged))
		}
	}
	return out
}

// worstTimes are the worst detect_s and recover_s of windows (over the
// per-kind summary's): none when a window never detected (or, of those
// that recover, never recovered).
func worstTimes(windows []event.WindowVerdict) event.Times {
	var t event.Times
	undetected, unrecovered := false, false
	for _, k := range Kinds(windows) {
		undetected = undetected || k.NotDetected > 0
		unrecovered = unrecovered || k.NotRecovered > 0
		t.DetectS, t.RecoverS = worse(t.DetectS, k.WorstDetectS), worse(t.RecoverS, k.WorstRecoverS)
	}
	if undetected {
		t.DetectS = nil
	}
	if unrecovered {
		t.RecoverS = nil
	}
	return t
}

// worse is the longer of two times (nil: none).
func worse(a, b *float64) *float64 {
	if a == nil || b != nil && *b > *a {
		return b
	}
	return a
}

// Kinds is what the windows of each fault kind came to, in the order the
// kinds first appear.
func Kinds(windows []event.WindowVerdict) []event.KindSummary {
	var out []event.KindSummary
	at := map[string]int{}
	for _, w := range windows {
		i, ok := at[w.Kind]
		if !ok {
			i = len(out)
			at[w.Kind] = i
			out = append(out, event.KindSummary{Kind: w.Kind})
		}
		k := &out[i]
		k.Count++
		switch {
		case w.NotJudged != "":
			k.NotJudged++
			continue // its times say nothing of the fault
		case w.Passed:
			k.Passed++
		default:
			k.Failed++
		}
		if d := w.Times.DetectS; d == nil {
			k.NotDetected++
		} else {
			k.WorstDetectS = worse(k.WorstDetectS, d)
		}
		if !w.Recovers {
			continue
		}
		if r := w.Times.RecoverS; r == nil {
			k.NotRecovered++
		} else {
			k.WorstRecoverS = worse(k.WorstRecoverS, r)
		}
	}
	return out
}
