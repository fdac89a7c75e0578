package check

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

func TestParseContentRule(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want ContentRule
		err  string
	}{
		{in: "exact", want: ContentRule{On: true}},
		{in: "prefix:12", want: ContentRule{On: true, Prefix: 12}},
		{in: "prefix:0", err: `--content-match "prefix:0": want prefix:N with N a whole number of characters, 1 or more`},
		{in: "prefix:x", err: `--content-match "prefix:x": want prefix:N`},
		{in: "prefix:", err: `--content-match "prefix:": want prefix:N`},
		{in: "fuzzy", err: `--content-match "fuzzy": want exact or prefix:N`},
		{in: "", err: `--content-match "": want exact or prefix:N`},
	} {
		got, err := ParseContentRule(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.in {
			t.Errorf("%q: %+v %v (String %q)", tt.in, got, err, got.String())
		}
	}
	if s := (ContentRule{}).String(); s != "" {
		t.Errorf("the zero rule prints %q, want \"\" (off)", s)
	}
}

func TestContentRuleOfARun(t *testing.T) {
	for _, tt := range []struct {
		info event.RunInfo
		want ContentRule
	}{
		{event.RunInfo{}, ContentRule{}}, // a stream from before the check
		{event.RunInfo{ContentTokens: 8}, ContentRule{On: true}},
		{event.RunInfo{ContentTokens: 8, ContentMatch: "prefix:5"}, ContentRule{On: true, Prefix: 5}},
		{event.RunInfo{ContentTokens: 0, ContentMatch: "exact"}, ContentRule{}},
		{event.RunInfo{ContentTokens: 8, ContentMatch: "bogus"}, ContentRule{On: true}},
	} {
		if got := ContentRuleOf(tt.info); got != tt.want {
			t.Errorf("%+v: %+v, want %+v", tt.info, got, tt.want)
		}
	}
}

func TestContentRuleMatch(t *testing.T) {
	exact := ContentRule{On: true}
	p5 := ContentRule{On: true, Prefix: 5}
	for _, tt := range []struct {
		r            ContentRule
		source, pull string
		want         bool
	}{
		{exact, " the of and", " the of and", true},
		{exact, " the of and", " the of was", false},
		{p5, " the of and", " the of was", true},  // first 5 agree
		{p5, " the of and", " thx of and", false}, // they part at the 4th
		{p5, " the", " the", true},                // equal whole, shorter than 5
		{p5, " the", " the of", false},            // the shorter one stops before 5
		{p5, "ééééé-a", "ééééé-b", true},          // characters, not bytes
		{ContentRule{On: true, Prefix: 1}, "", "", true},
	} {
		if got := tt.r.Match(tt.source, tt.pull); got != tt.want {
			t.Errorf("%v.Match(%q, %q) = %v, want %v", tt.r, tt.source, tt.pull, got, tt.want)
		}
	}
}

// textPull is a compared pull: status 200, the texts as given.
func textPull(source int, start time.Duration, own, got string) event.Sample {
	s := event.Sample{Source: source, Start: start, Status: 200, Latency: 10 * time.Millisecond, Content: event.ContentSame}
	if own != got {
		s.Content, s.SourceText, s.PullText = event.ContentDiffers, own, got
	}
	return s
}

func TestContentMatches(t *testing.T) {
	exact := ContentRule{On: true}
	var right []event.Sample
	for i := range 118 {
		right = append(right, textPull(i%2, time.Duration(i)*500*time.Millisecond, " a b", " a b"))
	}
	if r := ContentMatches(right, exact); !r.Passed || r.Name != NameContentMatches ||
		r.Detail != "all 118 pulls that returned 200 gave the source's own completion" {
		t.Errorf("all right: %+v", r)
	}

	// Pulls whose seed got no completion are not compared, and say so;
	// failed and aborted pulls are not counted at all.
	extra := append([]event.Sample(nil), right...)
	extra = append(extra,
		event.Sample{Source: 0, Start: time.Second, Status: 200}, // no content: the seed failed
		event.Sample{Source: 0, Start: time.Second, Status: 500, Content: event.ContentDiffers, SourceText: "x", PullText: "y"},
		event.Sample{Source: 0, Start: time.Second, Aborted: true, Status: 200, Content: event.ContentDiffers, SourceText: "x", PullText: "y"},
	)
	if r := ContentMatches(extra, exact); !r.Passed ||
		r.Detail != "all 118 pulls that returned 200 gave the source's own completion (1 more had none to compare: the source gave no completion of their prompt)" {
		t.Errorf("with uncompared pulls: %+v", r)
	}

	// The message, one source.
	wrong := append([]event.Sample(nil), right...)
	wrong[90] = textPull(0, 41200*time.Millisecond, " the of and", " is that for")
	wrong[94] = textPull(0, 43*time.Second, " x", " y")
	wrong[100] = textPull(0, 50*time.Second, " x", " z")
	r := ContentMatches(wrong, exact)
	if r.Passed || r.Empty ||
		r.Detail != `3 pulls naming source-0 returned other text than the source's completion (first at 41.2s: pull " is that for", source " the of and")` {
		t.Errorf("three wrong: %+v", r)
	}
	// Two sources.
	wrong[91] = textPull(1, 45*time.Second, " x", " y")
	r = ContentMatches(wrong, exact)
	if r.Passed || r.Detail != `3 pulls naming source-0 and 1 naming source-1 returned other text than the source's completion (first at 41.2s, naming source-0: pull " is that for", source " the of and")` {
		t.Errorf("two sources: %+v", r)
	}
	// A prefix rule forgives a tail that differs, and says it.
	tail := []event.Sample{textPull(0, time.Second, " the of and", " the of was"), textPull(1, 2*time.Second, " x", " x")}
	if r := ContentMatches(tail, ContentRule{On: true, Prefix: 7}); !r.Passed ||
		r.Detail != "all 2 pulls that returned 200 gave the source's own completion in its first 7 characters" {
		t.Errorf("prefix:7: %+v", r)
	}
	if r := ContentMatches(tail, exact); r.Passed {
		t.Errorf("exact on a differing tail passed: %+v", r)
	}
	// A long text is cut in the message.
	long := strings.Repeat(" word", 30)
	r = ContentMatches([]event.Sample{textPull(0, time.Second, long, long+"!")}, exact)
	if r.Passed || !strings.Contains(r.Detail, `…, source " word word`) || len(r.Detail) > 250 {
		t.Errorf("long texts: %+v", r)
	}
	// Nothing to compare: empty, failed.
	r = ContentMatches([]event.Sample{{Source: 0, Start: time.Second, Status: 200}}, exact)
	if r.Passed || !r.Empty || r.Detail != "empty: no pull returned 200 with a source completion to compare (1 returned 200, but the source gave no completion of their prompt)" {
		t.Errorf("none compared: %+v", r)
	}
}

func TestEvaluateAddsContentMatchesWhenOn(t *testing.T) {
	in := Input{
		Samples: []event.Sample{textPull(1, 15*time.Second, " a", " b"), textPull(0, 15*time.Second, " a", " a")},
		Window:  event.Window{Source: 0, Start: 10 * time.Second, End: 40 * time.Second},
		RunEnd:  60 * time.Second,
		Bounds:  DefaultBounds(),
	}
	names := func(v event.Verdict) (out []string) {
		for _, c := range v.Checks {
			out = append(out, c.Name)
		}
		return out
	}
	if v := Evaluate(in); strings.Contains(strings.Join(names(v), ","), NameContentMatches) {
		t.Errorf("content check off: checks %v", names(v))
	}
	in.Content = ContentRule{On: true}
	v := Evaluate(in)
	last := v.Checks[len(v.Checks)-1]
	if last.Name != NameContentMatches || last.Passed || v.Passed {
		t.Errorf("content check on, a wrong text: last check %+v, passed %v", last, v.Passed)
	}

	// The judge gives the same: content_matches after the seed's checks,
	// before fault_took_effect.
	setup := Setup{Bounds: in.Bounds, Sources: 2, Scripted: true, Content: ContentRule{On: true}}
	facts := RunFacts{Setup: setup, Windows: []event.Window{in.Window}, Samples: in.Samples, Now: in.RunEnd, RunEnd: in.RunEnd,
		Verifications: []event.Verification{{Action: "stall", Source: 0, At: 10 * time.Second, Verified: true}}}
	judged, ok := JudgeRun(facts)
	if got, want := strings.Join(names(judged), ","), strings.Join(append(names(v), NameFaultTookEffect), ","); !ok || got != want || judged.Passed {
		t.Errorf("judge's checks %s (passed %v), want %s failed", got, judged.Passed, want)
	}

	// Without a fault window only a content check that compared something
	// joins the verdict.
	facts.Windows, facts.Verifications = nil, nil
	facts.Samples = []event.Sample{{Source: 0, Start: 15 * time.Second, Status: 200, Latency: 10 * time.Millisecond}}
	none, ok := JudgeRun(facts)
	if ok || !none.Passed || strings.Join(names(none), ",") != NameAll200 {
		t.Errorf("nothing compared: %+v", none)
	}
	facts.Samples = in.Samples
	got, _ := JudgeRun(facts)
	if got.Passed || strings.Join(names(got), ",") != NameAll200+","+NameContentMatches {
		t.Errorf("a wrong text without a fault: %+v", got)
	}
}
