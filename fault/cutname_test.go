package fault

import (
	"context"
	"testing"
	"time"
)

type namedTarget struct{ name string }

func (n namedTarget) Name() string                          { return n.name }
func (namedTarget) Stop(context.Context) (time.Time, error) { return time.Time{}, nil }
func (namedTarget) Continue(context.Context) error          { return nil }
func (namedTarget) Kill(context.Context, func(time.Time, error)) (time.Time, error) {
	return time.Time{}, nil
}
func (namedTarget) Terminate(context.Context, func(time.Time, error)) error { return nil }
func (namedTarget) Restore(context.Context) (time.Time, error)              { return time.Time{}, nil }

// TestCutNameOfOneRankIsAFirewallName: the network names one rank's cut
// with no '/', which the run's firewall table refuses in a target's name.
func TestCutNameOfOneRankIsAFirewallName(t *testing.T) {
	if got := CutName(namedTarget{"source-0/rank1"}); got != "source-0.rank1" {
		t.Errorf("CutName = %q, want source-0.rank1", got)
	}
	if got := CutName(namedTarget{"source-0"}); got != "source-0" {
		t.Errorf("CutName of a source = %q", got)
	}
}
