package fault_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"p2pfault/exitcode"
	"p2pfault/fault"
)

func TestParseReadsSteps(t *testing.T) {
	tests := []struct {
		name string
		text string
		want fault.Timeline
	}{
		{"two steps separated by a semicolon", "at 10s stall source-0 for 30s; at 50s remove source-1", fault.Timeline{
			{At: 10 * time.Second, Action: fault.Action{Kind: kind("stall"), Source: 0, Options: fault.Options{For: 30 * time.Second}}, Line: 1, Col: 1},
			{At: 50 * time.Second, Action: fault.Action{Kind: kind("remove"), Source: 1}, Line: 1, Col: 32},
		}},
		{"newlines, comments and blank lines", "# the seed's kill\n\n  at 1.5s kill source-12   # then back\nat 3s restore source-12;\n", fault.Timeline{
			{At: 1500 * time.Millisecond, Action: fault.Action{Kind: kind("kill"), Source: 12}, Line: 3, Col: 3},
			{At: 3 * time.Second, Action: fault.Action{Kind: kind("restore"), Source: 12}, Line: 4, Col: 1},
		}},
		{"steps sorted by time, ties kept in order", "at 2s resume source-0; at 1s stall source-0; at 2s kill source-1", fault.Timeline{
			{At: time.Second, Action: fault.Action{Kind: kind("stall"), Source: 0}, Line: 1, Col: 24},
			{At: 2 * time.Second, Action: fault.Action{Kind: kind("resume"), Source: 0}, Line: 1, Col: 1},
			{At: 2 * time.Second, Action: fault.Action{Kind: kind("kill"), Source: 1}, Line: 1, Col: 46},
		}},
		{"empty script", "  \n# nothing\n;;", nil},
		{"tabs and minutes", "at\t2m\tstall\tsource-0\tfor\t1m30s", fault.Timeline{
			{At: 2 * time.Minute, Action: fault.Action{Kind: kind("stall"), Source: 0, Options: fault.Options{For: 90 * time.Second}}, Line: 1, Col: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fault.Parse(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d steps %v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("step %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestParseErrorsNameTheirPosition(t *testing.T) {
	tests := []struct {
		name string
		text string
		want string
	}{
		{"bad duration", "at 10x stall source-0", `timeline:1:4: bad duration "10x"`},
		{"negative duration", "at -1s kill source-0", `timeline:1:4: negative duration "-1s"`},
		{"no at", "stall source-0", `timeline:1:1: want "at DURATION ACTION source-N", got "stall"`},
		{"unknown action", "at 1s freeze source-0", `timeline:1:7: unknown action "freeze" (want stall, resume, kill, replace, remove, restore, partition, loss, busy, heal, gone, mute, hold-ack, drop, delay, late-fetch, unlink, latency, bandwidth, reset, slow-close, half-open, ack-withheld, fetch-lost, slow-link)`},
		{"bad target", "at 1s stall src0", `timeline:1:13: bad target "src0"`},
		{"target with leading zero", "at 1s kill source-01", `timeline:1:12: bad target "source-01"`},
		{"for with kill", "at 1s kill source-0 for 3s", `timeline:1:21: "for" goes only with stall, partition, loss, busy, mute, hold-ack, drop, delay, late-fetch, latency, bandwidth, reset, slow-close, half-open, ack-withheld, fetch-lost, slow-link, not kill`},
		{"missing stall length", "at 1s stall source-0 for", `timeline:1:25: missing a duration after "at 1s stall source-0 for"`},
		{"missing target", "at 1s stall", `timeline:1:12: missing a target after "at 1s stall"`},
		{"zero stall", "at 1s stall source-0 for 0s", `timeline:1:26: stall for "0s": want a positive duration`},
		{"trailing word", "at 1s stall source-0 now", `timeline:1:22: unexpected "now" after "at 1s stall source-0"`},
		{"error on the second line", "at 1s stall source-0\nat 2s kill source-x", `timeline:2:12: bad target "source-x"`},
		{"error in the second statement of a line", "at 1s stall source-0; at 2s kil source-1", `timeline:1:29: unknown action "kil"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fault.Parse(tt.text)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tt.text)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want %q", err, tt.want)
			}
			if exitcode.Code(err) != exitcode.Usage {
				t.Errorf("exit code %d, want %d", exitcode.Code(err), exitcode.Usage)
			}
		})
	}
}

func TestTimelineStringParsesBack(t *testing.T) {
	text := "at 10s stall source-0 for 30s; at 1m0s remove source-1; at 1m30.5s restore source-1"
	tl, err := fault.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if got := tl.String(); got != text {
		t.Errorf("String() = %q, want %q", got, text)
	}
	again, err := fault.Parse(tl.String())
	if err != nil || again.String() != text {
		t.Errorf("reparse: %v, %q", err, again)
	}
}

func TestPresetIsTheSeedCaseAtTheGivenTimes(t *testing.T) {
	tests := []struct {
		name    string
		at, dur time.Duration
		want    string
	}{
		{"stall", 10 * time.Second, 30 * time.Second, "at 10s stall source-0 for 30s"},
		{"stall", time.Second, 3 * time.Second, "at 1s stall source-0 for 3s"},
		{"kill", 10 * time.Second, 30 * time.Second, "at 10s kill source-0"},
		{"kill", 500 * time.Millisecond, 0, "at 500ms kill source-0"},
		{"remove", 20 * time.Second, 30 * time.Second, "at 20s remove source-0"},
		{"none", 10 * time.Second, 30 * time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl, err := fault.Preset(tt.name, tt.at, tt.dur)
			if err != nil {
				t.Fatal(err)
			}
			if got := tl.String(); got != tt.want {
				t.Errorf("Preset(%q, %v, %v) = %q, want %q", tt.name, tt.at, tt.dur, got, tt.want)
			}
		})
	}
}

func TestPresetRejectsUnknownCase(t *testing.T) {
	_, err := fault.Preset("freeze", time.Second, time.Second)
	want := `case "freeze": want one of stall, kill, replace, remove, partition, gone, late-fetch, half-open, ack-withheld, fetch-lost, slow-link, none`
	if err == nil || !strings.Contains(err.Error(), want) || exitcode.Code(err) != exitcode.Usage {
		t.Errorf("Preset(freeze) = %v, want usage error %q", err, want)
	}
}

func TestCheckNamesStepWithSourceOutOfRange(t *testing.T) {
	tl, err := fault.Parse("at 1s stall source-0\nat 2s kill source-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.Check(3, nil); err != nil {
		t.Errorf("3 sources: %v", err)
	}
	err = tl.Check(2, nil)
	if err == nil || !strings.Contains(err.Error(), "timeline:2:1: at 2s kill source-2 names source-2, but the cluster has sources 0-1") {
		t.Errorf("2 sources: %v", err)
	}
}

// TestPlayFiresStepsInOrderOnTimeAndStopsAtAFailure runs on the fake clock
// (a bubble): each step fires exactly at its time, however busy the
// machine is.
func TestPlayFiresStepsInOrderOnTimeAndStopsAtAFailure(t *testing.T) {
	synctest.Test(t, testPlayFiresStepsInOrderOnTimeAndStopsAtAFailure)
}

func testPlayFiresStepsInOrderOnTimeAndStopsAtAFailure(t *testing.T) {
	tl, err := fault.Parse("at 0s stall source-1; at 100ms kill source-0; at 300ms remove source-1; at 400ms restore source-1")
	if err != nil {
		t.Fatal(err)
	}
	var fired []string
	at := map[string]time.Duration{}
	start := time.Now()
	err = tl.Play(context.Background(), start, func(_ context.Context, s fault.Step) error {
		fired = append(fired, s.Kind.Name)
		at[s.Kind.Name] = time.Since(start)
		if s.Kind.Name == "remove" {
			return errors.New("it would not go")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "at 300ms remove source-1: it would not go") {
		t.Errorf("Play error %v, want the remove step's error", err)
	}
	if got := strings.Join(fired, " "); got != "stall kill remove" {
		t.Errorf("fired %q, want the steps up to the failed one, in order", got)
	}
	for _, s := range tl[:3] {
		if got := at[s.Kind.Name]; got != s.At {
			t.Errorf("%s fired at %v, want %v", s, got, s.At)
		}
	}
}

// TestPlayStopsWhenContextEnds runs on the fake clock: Play returns at the
// instant its context ends, not at the next step.
func TestPlayStopsWhenContextEnds(t *testing.T) {
	synctest.Test(t, testPlayStopsWhenContextEnds)
}

func testPlayStopsWhenContextEnds(t *testing.T) {
	tl, err := fault.Parse("at 0s stall source-0; at 10s kill source-0")
	if err != nil {
		t.Fatal(err)
	}
	const limit = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var n int
	start := time.Now()
	err = tl.Play(ctx, start, func(context.Context, fault.Step) error { n++; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || n != 1 {
		t.Errorf("Play = %v after %d steps, want deadline exceeded after 1", err, n)
	}
	if took := time.Since(start); took != limit {
		t.Errorf("Play took %v, want %v: it returns when its context ends", took, limit)
	}
}

// TestTargetsAtTwoGrains: source-N is the whole engine, source-N/rankR one
// rank's engine core; both parse back from String, bad spellings are
// usage errors naming their position, a kind that takes no rank says which
// do, and Check knows each source's ranks.
func TestTargetsAtTwoGrains(t *testing.T) {
	tl, err := fault.Parse("at 10s stall source-0/rank1 for 30s; at 1s partition source-1; at 50s kill source-0/rank0")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name  string
		grain fault.Grain
	}{{"source-1", fault.Grain{}}, {"source-0/rank1", fault.OneRank(1)}, {"source-0/rank0", fault.OneRank(0)}}
	for i, w := range want {
		if got := tl[i].TargetName(); got != w.name || tl[i].Grain != w.grain {
			t.Errorf("step %d: target %s grain %+v, want %s %+v", i, got, tl[i].Grain, w.name, w.grain)
		}
	}
	back, err := fault.Parse(tl.String())
	if err != nil || back.String() != tl.String() {
		t.Errorf("String %q parses back as %q (%v)", tl, back, err)
	}
	if err := tl.Check(2, []int{2, 1}); err != nil {
		t.Errorf("source-0 of 2 ranks: %v", err)
	}
	err = tl.Check(2, nil)
	if err == nil || !strings.Contains(err.Error(), "timeline:1:1: at 10s stall source-0/rank1 for 30s names source-0/rank1, but source-0 has one engine core") {
		t.Errorf("no ranks: %v", err)
	}
	if err := tl.Check(2, []int{2}); err != nil {
		t.Errorf("ranks of source-0 only: %v", err)
	}
	for _, tt := range []struct{ text, want string }{
		{"at 1s stall source-0/rank", `timeline:1:13: bad rank "rank" in target "source-0/rank" (want rankR, e.g. source-0/rank1)`},
		{"at 1s stall source-0/r1", `bad rank "r1"`},
		{"at 1s stall source-0/rank01", `bad rank "rank01"`},
		{"at 1s stall source-x/rank1", `bad target "source-x/rank1" (want source-N or source-N/rankR`},
		{"at 1s restore source-0/rank-1", `bad rank "rank-1"`},
	} {
		_, err := fault.Parse(tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("Parse(%q) = %v, want usage error with %q", tt.text, err, tt.want)
		}
	}
}

// TestDecoderTargets: "decoder-N" names a decoder (Grain.Decoder), and
// "decoder" decoder-0, the one decoder's name in a run of one; steps name
// it back as decoder-N; CheckDecoders refuses one the cluster does not
// have, as a usage error naming the step; a decoder takes no rank.
func TestDecoderTargets(t *testing.T) {
	tl, err := fault.Parse("at 10s stall decoder-1 for 30s; at 50s kill decoder; at 60s busy decoder-1 for 5s")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"decoder-1", "decoder-0", "decoder-1"} {
		if got := tl[i].TargetName(); got != want || !tl[i].Decoder || tl[i].OnRank {
			t.Errorf("step %d: %s %+v, want %s on a decoder", i, got, tl[i].Grain, want)
		}
	}
	if got, want := tl.String(), "at 10s stall decoder-1 for 30s; at 50s kill decoder-0; at 1m0s busy decoder-1 for 5s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if src, _ := fault.Parse("at 1s stall source-0"); !tl.OnDecoder() || src.OnDecoder() {
		t.Errorf("OnDecoder() = %v on decoders, %v on a source", tl.OnDecoder(), src.OnDecoder())
	}
	if err := tl.Check(1, nil); err != nil {
		t.Errorf("Check counts decoders as sources: %v", err)
	}
	if err := tl.CheckDecoders(2); err != nil {
		t.Errorf("two decoders: %v", err)
	}
	err = tl.CheckDecoders(1)
	if err == nil || exitcode.Code(err) != exitcode.Usage ||
		!strings.Contains(err.Error(), "timeline:1:1: at 10s stall decoder-1 for 30s names decoder-1, but the cluster has one decoder") {
		t.Errorf("one decoder: %v", err)
	}
	for _, text := range []string{"at 1s stall decoder-x", "at 1s stall decoder-01", "at 1s stall decoder-1/rank0", "at 1s stall decoders"} {
		_, err := fault.Parse(text)
		if err == nil || !strings.Contains(err.Error(), "want decoder-N") || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("Parse(%q) = %v, want a usage error naming the target", text, err)
		}
	}
}

// TestPairTargets: "source-N from decoder-M" names one pair for the kinds
// that take one (partition, loss), reads back as written, and is counted
// against the decoders; any other kind, or a pair that is not a source and
// a decoder, is a usage error naming it.
func TestPairTargets(t *testing.T) {
	tl, err := fault.Parse("at 10s partition source-0 from decoder-1 for 30s; at 50s loss 30% source-1 from decoder for 5s; at 60s partition source-0 from decoder-1; at 70s heal source-0 from decoder-1")
	if err != nil {
		t.Fatal(err)
	}
	if s := tl[0]; !s.Pair || s.Source != 0 || s.Peer != 1 || s.Decoder || s.TargetName() != "source-0 from decoder-1" {
		t.Errorf("step 0: %+v (%s)", s.Grain, s.TargetName())
	}
	want := "at 10s partition source-0 from decoder-1 for 30s; at 50s loss 30% source-1 from decoder-0 for 5s; at 1m0s partition source-0 from decoder-1; at 1m10s heal source-0 from decoder-1"
	if got := tl.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if back, err := fault.Parse(want); err != nil || back.String() != want {
		t.Errorf("%q parses back as %q (%v)", want, back, err)
	}
	if !tl.HasPair() || !tl.OnDecoder() {
		t.Error("HasPair or OnDecoder false for a pair")
	}
	if err := tl.CheckDecoders(1); err == nil || !strings.Contains(err.Error(), "names decoder-1, but the cluster has one decoder") {
		t.Errorf("one decoder: %v", err)
	}
	for _, tt := range []struct{ text, want string }{
		{"at 1s stall source-0 from decoder-1", "stall takes no pair (source-0 from decoder-1): only partition, loss, heal, mute, hold-ack, drop, delay, late-fetch, unlink, latency, bandwidth, reset, slow-close, half-open, ack-withheld, fetch-lost, slow-link do"},
		{"at 1s partition decoder-1 from source-0", "want source-N from decoder-M, got decoder-1 from source-0"},
		{"at 1s partition source-0 from source-1", "want source-N from decoder-M, got source-0 from source-1"},
		{"at 1s partition source-0/rank1 from decoder-1", "want source-N from decoder-M"},
		{"at 1s partition source-0 from", "missing a decoder (from decoder-M)"},
	} {
		_, err := fault.Parse(tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("Parse(%q) = %v, want usage error with %q", tt.text, err, tt.want)
		}
	}
}
