package fault

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/relay"
)

// The link kinds act on the run's links (--link, package relay): on single
// control messages between a decoder and a source (mute, hold-ack, drop,
// delay, late-fetch) and on the link's bytes (latency, bandwidth, reset,
// slow-close), the engines untouched. Each is in force until unlink, its
// "for", or the run's end, and verifies itself from the links' counters.

// CondLink is a source with a link fault in force.
const CondLink event.Condition = "faulted on its link"

// ActionUnlink ends the link fault in force on a source.
const ActionUnlink = "unlink"

// LinkEnv is an Env whose run relays its pairs through links. The link
// kinds type-assert their Env to it; a run without links refuses them.
type LinkEnv interface {
	// Links are the links of the fired target (a source, or one rank of
	// it) with every decoder, or with the decoder named peer alone. A run
	// without links says so.
	Links(peer string) ([]*relay.Link, error)
}

// linkSpec is what a link kind does to each link, and how it reads its
// effect from the counters.
type linkSpec struct {
	fault  func(relay.Message) relay.Action // nil: no message fault
	toxics *relay.Toxics                    // nil: no toxics
	reset  bool                             // reset every connection at the start
	// once: without "for" the fault ends as soon as it acted (a reset).
	once bool
	// effect is how many messages or frames the fault acted on since
	// before, and the line that says what it did.
	effect func(before, now relay.Counters) (int64, string)
}

// LinkFault is a link fault in force: undone by unlink, its "for", or the
// run's end (LinkFault.UndoBy).
type LinkFault struct {
	spec   linkSpec
	links  []*relay.Link
	before []relay.Counters
	at     time.Time

	once    sync.Once
	done    chan struct{}
	undone  time.Time
	undoneB string
	// shaper, when set, holds the fault in place of links (shape.go);
	// err is what its undo met, recorded with the unlink.
	shaper Shaper
	err    error
}

// UndoBy takes the fault off every link (if not done already), asked for
// by someone ("key", "script"; "" for its timer or the run's end). What
// it withheld is dropped: a message held past its peer's deadline is not
// delivered late.
func (lf *LinkFault) UndoBy(by string) error {
	lf.once.Do(func() {
		if lf.shaper != nil {
			lf.err = lf.shaper.Unshape()
		}
		for _, l := range lf.links {
			if lf.spec.fault != nil {
				l.SetFault(nil)
				l.Discard()
			}
			if lf.spec.toxics != nil {
				l.SetToxics(relay.Toxics{})
			}
		}
		lf.undone, lf.undoneB = time.Now(), by
		close(lf.done)
	})
	return lf.err
}

// effect sums the fault's effect over its links (a shaper's: none it can
// count).
func (lf *LinkFault) effect() (int64, string) {
	if lf.shaper != nil {
		return 0, "shaped by the cluster, not counted by p2pfault"
	}
	var n int64
	var lines []string
	for i, l := range lf.links {
		k, line := lf.spec.effect(lf.before[i], l.Counters())
		n += k
		if len(lf.links) > 1 {
			line = l.Name() + ": " + line
		}
		lines = append(lines, line)
	}
	return n, strings.Join(lines, "; ")
}

// linksOf are the links f acts on, or an error naming what is missing.
func linksOf(f *Fire) ([]*relay.Link, error) {
	le, ok := f.Env.(LinkEnv)
	if !ok {
		return nil, fmt.Errorf("this run relays no link (run with --link)")
	}
	ls, err := le.Links(f.Peer)
	if err == nil && len(ls) == 0 {
		err = fmt.Errorf("no link of %s is up yet (a link is made as the pair's first pull names it)", f.Target.Name())
	}
	return ls, err
}

// actLink puts spec on f's links and keeps it in force until undone.
func actLink(f *Fire, spec linkSpec) error {
	env, name := f.Env, f.Kind.Name
	ls, err := linksOf(f)
	if err != nil {
		err = fmt.Errorf("%s %s: %w", name, f.Target.Name(), err)
		env.Record(name, f.For, f.By, err)
		return err
	}
	lf := &LinkFault{spec: spec, links: ls, at: time.Now(), done: make(chan struct{})}
	for _, l := range ls {
		lf.before = append(lf.before, l.Counters())
		if spec.fault != nil {
			l.SetFault(spec.fault)
		}
		if spec.toxics != nil {
			l.SetToxics(*spec.toxics)
		}
		if spec.reset {
			l.Reset()
		}
	}
	holdLink(f, lf)
	return nil
}

// holdLink keeps lf in force on f's target until it is undone, and
// records its end.
func holdLink(f *Fire, lf *LinkFault) {
	env, name := f.Env, f.Kind.Name
	f.link = lf
	env.Hold(lf)
	f.Enter()
	env.Record(name, f.For, f.By, nil)
	env.OpenWindow(lf.at, true)
	env.Changed()
	env.Go(func() {
		undoLater(env.Context(), lf.at, f.For, lf.done, lf.UndoBy)
		<-lf.done
		env.Hold(nil)
		f.Lift()
		by := f.By
		if lf.undoneB != "" {
			by = lf.undoneB
		}
		env.Record(ActionUnlink, 0, by, lf.err)
		env.CloseWindow(lf.undone)
		env.Changed()
		if env.Context().Err() == nil {
			// What the fault did in all, from the counters: the line its
			// verification gave at the start, at the end.
			_, line := lf.effect()
			env.Verified(ActionUnlink, Effect{OK: true, After: time.Since(lf.undone), Detail: fmt.Sprintf("%s ended after %s: %s", name, lf.undone.Sub(lf.at).Round(time.Millisecond), line)})
		}
	})
}

// verifyLink confirms the fault from the links' counters: it acted on a
// message or a frame within the verification's wait (a run probes every
// source twice a second, so a lookup, a fetch or a heartbeat comes).
func verifyLink(f *Fire) Effect {
	lf := f.link
	if lf == nil {
		return Effect{Skipped: true}
	}
	if lf.shaper != nil {
		return lf.shaper.VerifyCut(f.Env.Context())
	}
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(linkVerifyWait)
	defer deadline.Stop()
	for {
		n, line := lf.effect()
		if n > 0 {
			return Effect{OK: true, After: time.Since(start), Detail: line}
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return Effect{After: time.Since(start), Detail: fmt.Sprintf("%s %s: nothing to act on yet: %s", f.Kind.Name, f.Target.Name(), line)}
		case <-lf.done:
			if n, line = lf.effect(); n > 0 {
				continue
			}
			return Effect{After: time.Since(start), Detail: fmt.Sprintf("%s %s was undone before it acted: %s", f.Kind.Name, f.Target.Name(), line)}
		case <-f.Env.Context().Done():
			return Effect{Skipped: true}
		}
	}
}

// linkVerifyWait is how long a link fault waits for a message to act on:
// the run's check allows check.DefaultVerifyWithin (2 s), past which it
// warns.
const linkVerifyWait = 5 * time.Second

// registerLink registers a link kind: in force until unlink, its "for" or
// the run's end, on a source or one pair, verified from the counters.
func registerLink(k *Kind, spec func(f *Fire) (linkSpec, error)) {
	k.TakesFor, k.Needs, k.Leaves = true, event.CondUp, CondLink
	k.Opens, k.Ending, k.Pairs, k.Ranks, k.Link = true, EndsAfterFor, true, RankAlone, true
	k.Act = func(f *Fire) error {
		s, err := spec(f)
		if err != nil {
			err = fmt.Errorf("%s %s: %w", k.Name, f.Target.Name(), err)
			f.Env.Record(k.Name, f.For, f.By, err)
			return err
		}
		if s.once && f.For == 0 {
			s.toxics = nil
		}
		if sh, ok := f.Target.(Shaper); ok && k.Shapes {
			return actShape(f, sh, s)
		}
		if err := actLink(f, s); err != nil {
			return err
		}
		if s.once && f.For == 0 {
			f.link.UndoBy("")
		}
		return nil
	}
	k.Verify = verifyLink
	Register(k)
}

func init() {
	Register(&Kind{
		Name: ActionUnlink, Key: "x", Help: "unlink", LongHelp: "end link fault", Order: 95, MoreHelp: true,
		Needs: CondLink, Leaves: event.CondUp, Hint: "unlink it", Closes: true, Ending: EndsWithRecovery,
		Pairs: true, Ranks: RankAlone, Link: true,
		Act: func(f *Fire) error {
			lf, _ := f.Env.Held().(*LinkFault)
			if lf == nil {
				err := fmt.Errorf("cannot unlink %s: it has no link fault in force", f.Target.Name())
				f.Env.Record(ActionUnlink, 0, f.By, err)
				return err
			}
			return lf.UndoBy(f.By)
		},
	})
}

// counted is the effect of a message fault: how many messages of typ in
// dir it did verb to, beside the heartbeats that passed meanwhile.
func counted(dir relay.Dir, typ string, verb relay.Verb) func(before, now relay.Counters) (int64, string) {
	return func(b, n relay.Counters) (int64, string) {
		get := func(c relay.Counters) int64 {
			x := c.Of(dir, typ)
			switch verb {
			case relay.Drop:
				return x.Dropped
			case relay.Hold:
				return x.Held
			case relay.Delay:
				return x.Delayed
			}
			return x.Passed
		}
		k := get(n) - get(b)
		hb := n.Heartbeats[relay.ToSource] + n.Heartbeats[relay.ToDecoder] - b.Heartbeats[relay.ToSource] - b.Heartbeats[relay.ToDecoder]
		words := map[relay.Verb]string{relay.Drop: "dropped", relay.Hold: "withheld", relay.Delay: "delayed"}
		return k, fmt.Sprintf("%d %s %s, %d heartbeats passed", k, typ, words[verb], hb)
	}
}

// only is a message fault acting on typ in dir alone.
func only(dir relay.Dir, typ string, a relay.Action) func(relay.Message) relay.Action {
	return func(m relay.Message) relay.Action {
		if m.Dir == dir && m.Type == typ {
			return a
		}
		return relay.Action{}
	}
}
