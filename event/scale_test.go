package event

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func TestTimeScaleOfReadsUnsetAsRealTime(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 1: 1, 0.05: 0.05, 3: 3} {
		if got := TimeScaleOf(in); got != want {
			t.Errorf("TimeScaleOf(%g) = %g, want %g", in, got, want)
		}
	}
}

func TestValidTimeScaleIsPositiveAndFinite(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want bool
	}{{1, true}, {0.01, true}, {100, true}, {0, false}, {-1, false}, {math.Inf(1), false}, {math.NaN(), false}} {
		if got := ValidTimeScale(c.in); got != c.want {
			t.Errorf("ValidTimeScale(%g) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestCheckModeKnowsP2PAndPD(t *testing.T) {
	for _, m := range []string{"", ModeP2P, ModePD} {
		if err := CheckMode(m); err != nil {
			t.Errorf("CheckMode(%q) = %v, want nil", m, err)
		}
	}
	err := CheckMode("decode")
	if err == nil || err.Error() != `mode "decode": want p2p or pd` {
		t.Errorf(`CheckMode("decode") = %v, want mode "decode": want p2p or pd`, err)
	}
}

// TestCheckScaledRefusesOverflowAndZero: a duration that overflows or
// rounds to zero once scaled is refused, saying which; the longest and
// the shortest that pass do.
func TestCheckScaledRefusesOverflowAndZero(t *testing.T) {
	tests := []struct {
		d     time.Duration
		scale float64
		want  string // "" passes
	}{
		{30 * time.Second, 1, ""},
		{2000000 * time.Hour, 1, ""},
		{2000000 * time.Hour, 4, "overflows: at this scale a duration may be at most 640511h56m49s"},
		{2000000 * time.Hour, 1000, "overflows: at this scale a duration may be at most 2562h2m"},
		{math.MaxInt64, 1, "overflows"}, // as a float64 it is 2^63, one past it
		{math.MaxInt64, 1.0000001, "overflows"},
		{time.Second, 1e-300, "rounds to zero, as every duration does at this scale"},
		{time.Nanosecond, 0.5, "rounds to zero: at this scale a duration must be at least 2ns"},
		{3 * time.Nanosecond, 0.5, ""},
		{0, 1e-300, ""},
		{-time.Second, 1e300, ""},
	}
	for _, tt := range tests {
		err := CheckScaled(tt.d, tt.scale)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckScaled(%v, %g) = %v, want nil", tt.d, tt.scale, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("CheckScaled(%v, %g) = %v, want %q", tt.d, tt.scale, err, tt.want)
		}
	}
	for _, scale := range []float64{1, 0.5, 4, 1000, 1.0000001, 3.7e9, 1e18} {
		longest := LongestScaled(scale)
		if err := CheckScaled(longest, scale); err != nil {
			t.Errorf("LongestScaled(%g) = %v, refused: %v", scale, longest, err)
		}
		if scaled := time.Duration(float64(longest) * scale); scaled <= 0 {
			t.Errorf("LongestScaled(%g) = %v scales to %v", scale, longest, scaled)
		}
		if more := longest + time.Second; more > longest && CheckScaled(more, scale) == nil && longest >= time.Second {
			t.Errorf("LongestScaled(%g) = %v, but a second more passes", scale, longest)
		}
	}
}

// An unset duration takes its default; a negative one is told, named, and
// left as it was; a set one is kept.
func TestDefaultDurationSetsUnsetAndRefusesNegative(t *testing.T) {
	var said []string
	bad := func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
	unset, negative, set := time.Duration(0), -time.Second, 3*time.Second
	DefaultDuration(&unset, time.Minute, "interval", bad)
	DefaultDuration(&negative, time.Minute, "pull timeout", bad)
	DefaultDuration(&set, time.Minute, "rate window", bad)
	if unset != time.Minute || negative != -time.Second || set != 3*time.Second {
		t.Errorf("got %v, %v, %v; want 1m0s, -1s, 3s", unset, negative, set)
	}
	if len(said) != 1 || said[0] != "pull timeout -1s is negative" {
		t.Errorf("told %q, want only \"pull timeout -1s is negative\"", said)
	}
}
