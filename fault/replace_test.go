package fault_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/fault"
)

// TestReplaceOnARealClusterMovesTheSource fires replace on a launched
// engine: one replace event when the kill is sent (the window opens),
// then, once the new engine on new ports is ready, Changed (the probe
// learns the new address) before the ready event, and the window closes
// after both.
func TestReplaceOnARealClusterMovesTheSource(t *testing.T) {
	cfg := fakeConfig(t)
	cfg.Sources = 1
	c := startCluster(t, cfg)
	e := c.Sources()[0]
	before := e.Info()
	env := newRecEnv(t)
	if err := fire(env, fault.ActionReplace, e.Target(), 0); err != nil {
		t.Fatalf("replace: %v", err)
	}
	readyAt := env.wait(t, fault.ActionReady, 30*time.Second)
	env.wg.Wait()
	after := e.Info()
	if after.HTTPPort == before.HTTPPort || after.P2PPort == before.P2PPort || after.Sid == before.Sid || after.State != event.StateReady {
		t.Errorf("after replace %+v, before %+v: want new ports, a new session, ready", after, before)
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	if got := strings.Join(env.evs, " "); got != "replace: ready:" {
		t.Errorf("events %q, want %q", got, "replace: ready:")
	}
	if got := strings.Join(env.windows, " "); got != "open close" {
		t.Fatalf("windows %q, want one opened and closed", got)
	}
	// Changed after the kill (the faces), and again with the new engine
	// ready and before its ready event: the probe names it from then on.
	if n := len(env.changed); n < 2 || env.changed[n-1] != "replace:" {
		t.Errorf("Changed saw the events %q, want its last call before the ready event", env.changed)
	}
	if env.winAt[1].Before(readyAt) {
		t.Errorf("window closed at %v, before the ready event at %v: pulls of the recovery window could name the old address", env.winAt[1], readyAt)
	}
	if env.cond != event.CondUp || env.failed != nil {
		t.Errorf("condition %q, failed %v", env.cond, env.failed)
	}
}

// replaceable is hostTarget with a Replace that moves it to new addresses
// (or, when sameAddr, to the old ones).
type replaceable struct {
	*hostTarget
	next     []string
	sameAddr bool
	refuse   error
}

func (r *replaceable) CanReplace() error { return r.refuse }
func (r *replaceable) Replace(_ context.Context, signalled func(time.Time, error)) (time.Time, error) {
	signalled(time.Now(), nil)
	r.sid += 100
	r.members('S')
	if !r.sameAddr {
		r.addrs = r.next
	}
	return time.Now(), nil
}

func TestReplaceIsVerifiedOnTheNewAddress(t *testing.T) {
	h := &replaceable{hostTarget: newHostTarget(t)}
	h.next = []string{closedAddr(t), closedAddr(t)}
	old := strings.Join(h.addrs, ", ")
	ef, r := verified(t, newRecEnv(t), fault.ActionReplace, h)
	if !ef.OK || !r.Passed {
		t.Fatalf("effect %+v, check %+v: want it seen", ef, r)
	}
	for _, want := range []string{"all 2 processes of old session 4242 gone", "new session ready", "at " + strings.Join(h.next, ", "), "(was " + old + ")"} {
		if !strings.Contains(ef.Detail, want) {
			t.Errorf("detail %q lacks %q", ef.Detail, want)
		}
	}
}

func TestReplaceOnTheOldAddressDidNotTakeEffect(t *testing.T) {
	h := &replaceable{hostTarget: newHostTarget(t), sameAddr: true}
	ef, r := verified(t, newRecEnv(t), fault.ActionReplace, h)
	if ef.OK || r.Passed {
		t.Fatalf("effect %+v, check %+v: a new engine on the old address is not a replace", ef, r)
	}
	if !strings.Contains(ef.Detail, "listens on the old address") {
		t.Errorf("detail %q does not say why", ef.Detail)
	}
}

// A target that cannot be replaced is refused by Can, with its reason,
// before anything is done; Act says the same if called anyway.
func TestReplaceRefusesATargetThatCannot(t *testing.T) {
	k, _ := fault.Lookup(fault.ActionReplace)
	h := newHostTarget(t)
	if err := k.Can(plainTarget{h}); err == nil || !strings.Contains(err.Error(), "cannot start another engine for source-0 on new ports") {
		t.Errorf("Can on a target without Replace: %v", err)
	}
	why := &replaceable{hostTarget: h, refuse: errTest("a local source is restarted from its command line")}
	if err := k.Can(why); err == nil || err.Error() != "a local source is restarted from its command line" {
		t.Errorf("Can on a target that says why not: %v", err)
	}
	env := newRecEnv(t)
	if err := fire(env, fault.ActionReplace, plainTarget{h}, 0); err == nil {
		t.Error("Act on a target without Replace succeeded")
	}
	if got := env.actions(); got != "replace:!" {
		t.Errorf("events %q, want the failed replace only", got)
	}
	if h.sid != 4242 {
		t.Errorf("the refused replace touched the target: its session is %d", h.sid)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }
