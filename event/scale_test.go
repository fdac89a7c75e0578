package event

import (
	"math"
	"testing"
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
