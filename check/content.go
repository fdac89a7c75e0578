package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"p2pfault/event"
)

// NameContentMatches is the check that every pull answered with the text
// its source gives for the same prompt.
const NameContentMatches = "content_matches"

// ContentRule is how a pull's text is compared with the source's own
// completion. The zero value is off (no content check: a stream written
// before the check existed, or --content-tokens 0).
type ContentRule struct {
	On bool
	// Prefix is 0 for an exact comparison, else the number of leading
	// characters (runes) that must be equal: greedy outputs of two real
	// vLLM instances can part ways after a while when a near-tie between
	// two tokens falls another way under another floating-point order.
	Prefix int
}

// ParseContentRule reads --content-match: "exact" or "prefix:N" (N ≥ 1).
func ParseContentRule(s string) (ContentRule, error) {
	if s == "exact" {
		return ContentRule{On: true}, nil
	}
	if n, ok := strings.CutPrefix(s, "prefix:"); ok {
		k, err := strconv.Atoi(n)
		if err != nil || k < 1 {
			return ContentRule{}, fmt.Errorf("--content-match %q: want prefix:N with N a whole number of characters, 1 or more", s)
		}
		return ContentRule{On: true, Prefix: k}, nil
	}
	return ContentRule{}, fmt.Errorf("--content-match %q: want exact or prefix:N", s)
}

// ContentRuleOf is the rule a run's events were judged by: off when the run
// compared no texts, else its ContentMatch ("" or a value no p2pfault
// writes reads as exact).
func ContentRuleOf(info event.RunInfo) ContentRule {
	if info.ContentTokens <= 0 {
		return ContentRule{}
	}
	r, err := ParseContentRule(info.ContentMatch)
	if err != nil {
		return ContentRule{On: true}
	}
	return r
}

// String is the rule as --content-match takes it ("" when off).
func (r ContentRule) String() string {
	switch {
	case !r.On:
		return ""
	case r.Prefix > 0:
		return "prefix:" + strconv.Itoa(r.Prefix)
	}
	return "exact"
}

// Match reports whether pull is the source's text under the rule. With a
// prefix, both texts must agree on their first Prefix characters, or be
// equal whole when either is shorter.
func (r ContentRule) Match(source, pull string) bool {
	if source == pull {
		return true
	}
	if r.Prefix <= 0 {
		return false
	}
	a, b := runePrefix(source, r.Prefix), runePrefix(pull, r.Prefix)
	return a == b && utf8.RuneCountInString(a) == r.Prefix
}

func runePrefix(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// Compared reports whether s is judged by the content check: an answered
// pull that returned 200 and whose source gave a completion to compare.
func (r ContentRule) Compared(s event.Sample) bool {
	return r.On && !s.Aborted && s.Status == 200 && s.Err == "" && s.Content != ""
}

// Wrong reports whether s is a compared pull whose text is not its
// source's under the rule.
func (r ContentRule) Wrong(s event.Sample) bool {
	return r.Compared(s) && s.Content == event.ContentDiffers && !r.Match(s.SourceText, s.PullText)
}

// ContentCount is one source's compared pulls and mismatches.
type ContentCount struct {
	Source   int
	Compared int
	Wrong    int
}

// ContentSummary is what the content check saw over a run.
type ContentSummary struct {
	// Returned200 counts the answered pulls that returned 200; of them,
	// Compared had a source completion to compare (the others' seed got
	// none: the source was stalled, down, or too slow for the seed
	// timeout).
	Returned200, Compared, Wrong int
	BySource                     []ContentCount // sources in order, only those with a pull that returned 200
	Mismatches                   []event.Sample // the wrong pulls, by start
}

// ContentTally counts the content check as pulls end, one at a time, so a
// run judged live keeps only its wrong pulls, not every sample (the
// experiment's judge keeps none).
type ContentTally struct {
	rule ContentRule
	sum  ContentSummary
	by   map[int]*ContentCount
}

// NewContentTally is an empty tally under rule r.
func NewContentTally(r ContentRule) *ContentTally {
	return &ContentTally{rule: r, by: map[int]*ContentCount{}}
}

// Add counts one pull that ended.
func (t *ContentTally) Add(s event.Sample) {
	r := t.rule
	if s.Aborted || s.Status != 200 || s.Err != "" {
		return
	}
	t.sum.Returned200++
	c := t.by[s.Source]
	if c == nil {
		c = &ContentCount{Source: s.Source}
		t.by[s.Source] = c
	}
	if !r.Compared(s) {
		return
	}
	t.sum.Compared++
	c.Compared++
	if r.Wrong(s) {
		t.sum.Wrong++
		c.Wrong++
		t.sum.Mismatches = append(t.sum.Mismatches, s)
	}
}

// Summary is what the tally counted, sources in order, mismatches by start.
func (t *ContentTally) Summary() ContentSummary {
	sum := t.sum
	sum.BySource = nil
	for _, c := range t.by {
		sum.BySource = append(sum.BySource, *c)
	}
	slices.SortFunc(sum.BySource, func(a, b ContentCount) int { return a.Source - b.Source })
	sum.Mismatches = slices.Clone(t.sum.Mismatches)
	slices.SortFunc(sum.Mismatches, cmpStart)
	return sum
}

// Result is check content_matches over the pulls added.
func (t *ContentTally) Result() event.Result { return contentResult(t.Summary(), t.rule) }

// SummarizeContent counts, over the pulls that returned 200, those with a
// source completion to compare and the wrong ones, by source.
func SummarizeContent(samples []event.Sample, r ContentRule) ContentSummary {
	t := NewContentTally(r)
	for _, s := range samples {
		t.Add(s)
	}
	return t.Summary()
}

// ContentMatches is the check content_matches over the run's pulls: every
// pull that returned 200 and whose source gave its own completion of the
// prompt must have answered that text, local prefills included. It fails
// empty when no pull could be compared.
func ContentMatches(samples []event.Sample, r ContentRule) event.Result {
	return contentResult(SummarizeContent(samples, r), r)
}

// contentResult is content_matches's result from the counts.
func contentResult(sum ContentSummary, r ContentRule) event.Result {
	res := event.Result{Name: NameContentMatches}
	uncompared := sum.Returned200 - sum.Compared
	if sum.Compared == 0 {
		res.Empty = true
		res.Detail = "empty: no pull returned 200 with a source completion to compare"
		if uncompared > 0 {
			res.Detail += fmt.Sprintf(" (%d returned 200, but the source gave no completion of their prompt)", uncompared)
		}
		return res
	}
	rule := ""
	if r.Prefix > 0 {
		rule = fmt.Sprintf(" in its first %d characters", r.Prefix)
	}
	if sum.Wrong == 0 {
		res.Passed = true
		res.Detail = fmt.Sprintf("all %d pulls that returned 200 gave the source's own completion%s", sum.Compared, rule)
		if sum.Compared == 1 {
			res.Detail = "the 1 pull that returned 200 gave the source's own completion" + rule
		}
		if uncompared > 0 {
			res.Detail += fmt.Sprintf(" (%d more had none to compare: the source gave no completion of their prompt)", uncompared)
		}
		return res
	}
	var naming []string
	for _, c := range sum.BySource {
		if c.Wrong == 0 {
			continue
		}
		if len(naming) == 0 {
			naming = append(naming, fmt.Sprintf("%d %s naming %s", c.Wrong, plural(c.Wrong, "pull", "pulls"), event.SourceName(c.Source)))
		} else {
			naming = append(naming, fmt.Sprintf("%d naming %s", c.Wrong, event.SourceName(c.Source)))
		}
	}
	first := sum.Mismatches[0]
	where := ""
	if len(naming) > 1 {
		where = ", naming " + event.SourceName(first.Source)
	}
	res.Detail = fmt.Sprintf("%s returned other text than the source's completion%s (first at %s%s: pull %s, source %s)",
		strings.Join(naming, " and "), rule, secs1(first.Start), where, QuoteText(first.PullText), QuoteText(first.SourceText))
	return res
}

// QuoteText quotes a completion for a one-line message, cut to 48
// characters.
func QuoteText(s string) string {
	const max = 48
	if utf8.RuneCountInString(s) > max {
		return strconv.Quote(runePrefix(s, max)) + "…"
	}
	return strconv.Quote(s)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// withContent adds content_matches, over the pulls t counted, to the
// verdict of a run without a fault window (case none, or a run that ended
// before its fault), which judges no window: the answers can be wrong with
// no fault at all. It is left out while nothing could be compared, so a
// run that checked nothing still says only that. (A run judged on a fault
// window judges it even when nothing could be compared: Judge.Verdict.)
func withContent(v event.Verdict, t *ContentTally) event.Verdict {
	if !t.rule.On {
		return v
	}
	res := t.Result()
	if res.Empty {
		return v
	}
	v.Checks = append(append([]event.Result(nil), v.Checks...), res)
	v.Passed = v.Passed && res.Passed
	return v
}
