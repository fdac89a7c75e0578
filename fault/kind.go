// Package fault is p2pfault's fault vocabulary: each fault kind (stall =
// SIGSTOP for a while, resume, kill = SIGKILL and restart, remove =
// SIGTERM and left down, restore) is one value registered by name, in a
// file of its own, with what it needs to act on a Target, undo and say
// what it did; the timeline language (Parse, Preset) and its one player
// (Timeline.Play). Faces and the experiment look kinds up by name. The
// package runs no process itself: targets do (runner.Target for the
// engines p2pfault launched).
package fault

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/verify"
)

// Ending says how a kind's step bears on when a scripted run ends.
type Ending int

const (
	EndsAtOnce       Ending = iota // opens no window of its own
	EndsAfterFor                   // its window closes after For (when given), then the recovery window
	EndsWithRecovery               // its window closes soon (a restart); the recovery window follows
	StaysDown                      // its window lasts to the end; the run ends FaultFor later
)

// Case says whether a kind is a fault case of its own: `run --case NAME`
// and `slice --cases NAME` fire it once on source-0 at the run's fault
// time, with the run's fault length when it takes "for" (Preset).
type Case int

const (
	NoCase   Case = iota // fired only from a timeline or a key
	OwnCase              // a case (partition)
	SeedCase             // a case of the seed's slice, which slice runs by default (stall, kill, remove)
)

// Options tune one firing of a kind.
type Options struct {
	For time.Duration // kinds with TakesFor: how long the fault lasts (0: until undone)
	Arg string        // kinds with an Arg: its word as written, e.g. "30%" for loss
}

// Arg is the word a kind takes between its name and its target in the
// timeline (`loss 30% source-0`): the parser checks it, Act reads it.
type Arg struct {
	Name  string             // in messages, e.g. "a share such as 30%"
	Check func(string) error // nil when the word is good; the error says why not
	// Optional: the word may be left out (`busy source-0`), and the kind
	// takes its defaults; Check then accepts "" too (a key fires it so).
	Optional bool
}

// Kind is one fault, registered by name (one file per kind, in the way
// toxiproxy registers its toxics). The timeline parser, the dashboard's
// keys and help, and the experiment look kinds up by name, so a new kind is
// one new file and touches no face.
type Kind struct {
	Name     string // the timeline's action word and the event's action
	Key      string // the dashboard key that fires it on the selected source ("" none)
	Help     string // one-line help, a word or two
	LongHelp string // the `?` help
	Order    int    // position in help and messages

	TakesFor bool // "for DURATION" is allowed in the timeline
	// NeedsFor: "for DURATION" must be given, since nothing else ends the
	// fault (busy: no kind undoes it).
	NeedsFor bool
	Arg      *Arg // the word it takes before the target (nil: none)
	// MoreHelp keeps the key out of the one-line help under the dashboard
	// (it fits 80 columns with the seed's kinds); `?` still lists it.
	MoreHelp bool
	// Needs is the condition the source must be in for the kind to act
	// ("" is event.CondUp: running, no fault in force), Leaves the one it
	// puts it in once taken. Refusal is the one rule over them.
	Needs  event.Condition
	Leaves event.Condition
	// Hint completes "press KEY to ..." when a target is in Leaves, e.g.
	// "resume it" for resume (which Needs Stalled).
	Hint string
	// Badge is the source's label while Leaves holds ("" = the
	// condition's own), e.g. KILLED until the restarted engine starts.
	Badge string
	// Opens and Closes say whether its event marks the start or the end
	// of a fault window on the dashboard's chart.
	Opens, Closes bool
	Ending        Ending
	// Case makes the kind a fault case of its own (its preset: Preset).
	Case Case

	// Act takes the fault on f.Target and reports what happened through
	// f.Env: its events, the window it opens or closes, the condition it
	// leaves. It returns once the action is taken (not when it is undone).
	Act func(f *Fire) error
	// Verify (optional) confirms on the host, after Act returned without
	// error, that the fault took effect (stall: every process stopped;
	// remove: the ports refuse; verify.go). The experiment sends what it
	// saw as a verification event, warns when it was not seen within
	// check.DefaultVerifyWithin, and judges check fault_took_effect on it.
	Verify func(f *Fire) Effect
	// Can (optional) says whether the kind can act on target t at all,
	// for what it needs of t beyond Target (the network kinds: a
	// NetTarget): nil when it can. The experiment refuses a firing with
	// its error, and a cluster that plans a timeline against its targets
	// (an attached one) refuses the step before the run.
	Can func(t Target) error
	// Setup (optional) says whether the kind can work on this host at all
	// (rights, kernel support): the experiment calls it before a run
	// whose timeline uses the kind (an error is a setup error, exit 2) and
	// before each firing, which it refuses with the error.
	Setup func() error
	// Pairs: the kind takes a pair as its target, one source's link with
	// one decoder (`partition source-0 from decoder-1`), on a network that
	// can cut a pair alone (PairNetwork).
	Pairs bool
	// NewAddress: the kind brings its target back at a new address
	// (replace). The probe follows a source's; a decoder's stays the one
	// it had, so a nemesis draws such a kind for sources only.
	NewAddress bool
	// Ranks says how the kind takes a target of one data-parallel rank
	// (source-0/rank1); the zero value refuses one.
	Ranks RankUse
	// HostFirewall: Setup checks the host's firewall (nftables, rights),
	// which the kind acts through only on a cluster without a network of
	// its own; a cluster that cuts its own links (a virtual cluster) is
	// not asked for it.
	HostFirewall bool
	// Link: the kind acts through the run's links (link.go): a timeline
	// or a nemesis that uses it makes the run relay its pairs (--link).
	Link bool
	// Shapes: a link kind that only slows the link's bytes (latency,
	// bandwidth), which a cluster that shapes its engines' packets itself
	// (a Shaper target: Chaos Mesh on Kubernetes) takes in place of the
	// links (shape.go).
	Shapes bool
	// Preset (optional, a case's kind) is what the case needs of the
	// cluster, beyond its timeline, to be the case it names.
	Preset *CasePreset
}

// CasePreset is a case's cluster: the layout it is about and, on the simulated
// engines, the settings of the vLLM build whose report it reproduces. A
// run of the case applies each part its user did not give (a flag given,
// even to the same value, wins) and says what it applied.
type CasePreset struct {
	SourceDP int    // --source-dp (0: the run's)
	Mode     string // --mode ("": the run's)
	// SimDecoderArgs and SimSourceArgs are "--flag=value" words for the
	// decoder's and the sources' command lines on --engine sim and virtual,
	// each left out when the user's --engine-arg or --decoder-arg
	// (--source-arg) names its flag.
	SimDecoderArgs, SimSourceArgs []string
	Why                           string // why, for the line the run prints
}

// RankUse is how a kind takes a target of one data-parallel rank.
type RankUse int

const (
	// RankRefused: the kind acts on whole engines only.
	RankRefused RankUse = iota
	// RankAlone: it acts on the rank's engine core alone (a stall stops
	// only that core, a partition cuts only its P2P port), or undoes what
	// is in force on the source (resume, heal).
	RankAlone
	// RankEngine: acting on one rank ends the whole engine, as vLLM does
	// when one engine core dies (kill, remove); the run says so.
	RankEngine
)

// RankRefusal is nil when the kind takes a target of one rank, else why
// not, naming the kinds that do.
func (k *Kind) RankRefusal() error {
	if k.Ranks != RankRefused {
		return nil
	}
	var takes []string
	for _, o := range Kinds() {
		if o.Ranks != RankRefused {
			takes = append(takes, o.Name)
		}
	}
	return fmt.Errorf("%s acts on a whole engine only (source-N); one rank (source-N/rankR) is taken by %s", k.Name, strings.Join(takes, ", "))
}

// Effect is what a kind's Verify saw on the host.
type Effect struct {
	OK     bool          // the effect was seen
	After  time.Duration // from the action (kill: the restarted source ready) until seen, or until given up
	Detail string        // what was seen, e.g. "2 of 2 processes of session 4242 in state T"
	// Skipped: the target cannot be inspected on the host (it is not an
	// Inspectable, or not now), so there is nothing to judge.
	Skipped bool
}

// Fire is one firing of a kind on one target.
type Fire struct {
	Kind   *Kind
	Target Target
	// Peer is, for an action on a pair, the engine at the pair's other end
	// (a decoder's name, "decoder-1"); "" otherwise.
	Peer string
	Options
	By  string // "script" or "key"
	Env Env
	// Verifier is what the kind's Verify reads the host with; the zero
	// value reads /proc (tests give it a faked process table).
	Verifier verify.Verifier

	// What a kind's Act leaves for its Verify (kill: the old session and
	// the restart's outcome).
	before  seen
	hasHost bool // before was read (/proc or the target's Report)
	restart chan error
	link    *LinkFault // a link kind's fault, for its Verify
}

// Enter records that the fault is in force on the target: it is in the
// condition its kind Leaves it in, stated once, in the registration.
func (f *Fire) Enter() { f.Env.SetCondition(f.Kind.Leaves) }

// Lift records that the fault in force on the target ended: it is up
// again (a stall resumed, a restart ready, a cut healed).
func (f *Fire) Lift() { f.Env.SetCondition(event.CondUp) }

// Env is what a kind acts in: the run's bookkeeping for the fired target,
// owned by the experiment.
type Env interface {
	Context() context.Context                                    // the run's; ends with it
	Record(action string, d time.Duration, by string, err error) // a fault event on the target
	OpenWindow(at time.Time, recovers bool)                      // a fault window opens on the target
	CloseWindow(at time.Time)                                    // ... and closes
	SetCondition(c event.Condition)                              // what the target is in now (kinds call Fire.Enter and Fire.Lift)
	Hold(h any)                                                  // keep the open fault's handle (a stall to resume); nil drops it
	Held() any
	Go(fn func())   // run fn in the background; a panic fails the run
	Fail(err error) // the run cannot go on
	Changed()       // the target's process state changed: tell the faces
	// Verified reports what a verification of action saw (a kind's Verify
	// after Act is reported by the experiment itself; a kind calls this for
	// an effect of its own, such as a stall's resume by its timer).
	Verified(action string, e Effect)
}

var (
	regMu sync.RWMutex
	kinds = map[string]*Kind{}
)

// Register adds a kind; a second kind of the same name or key panics (a
// programming error, found by any test). It returns a function that
// removes the kind again, for tests.
func Register(k *Kind) (unregister func()) {
	regMu.Lock()
	defer regMu.Unlock()
	if k.Name == "" || k.Act == nil {
		panic("fault: a kind needs a name and an Act")
	}
	if k.Name == CaseNone {
		panic("fault: no kind may be named " + CaseNone + ": it is the case without a fault")
	}
	if _, dup := kinds[k.Name]; dup {
		panic("fault: kind " + k.Name + " registered twice")
	}
	for _, o := range kinds {
		if k.Key != "" && o.Key == k.Key {
			panic(fmt.Sprintf("fault: kinds %s and %s both want key %q", o.Name, k.Name, k.Key))
		}
	}
	kinds[k.Name] = k
	return func() {
		regMu.Lock()
		defer regMu.Unlock()
		delete(kinds, k.Name)
	}
}

// Lookup returns the kind registered as name.
func Lookup(name string) (*Kind, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	k, ok := kinds[name]
	return k, ok
}

// Kinds lists every registered kind in help order.
func Kinds() []*Kind {
	regMu.RLock()
	out := make([]*Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	regMu.RUnlock()
	slices.SortFunc(out, func(a, b *Kind) int {
		if a.Order != b.Order {
			return a.Order - b.Order
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Names lists the kinds for messages: "stall, resume, kill, remove, restore".
func Names() string {
	var names []string
	for _, k := range Kinds() {
		names = append(names, k.Name)
	}
	return strings.Join(names, ", ")
}

// needs is the condition k acts in: Needs, or up when it says none.
func (k *Kind) needs() event.Condition {
	if k.Needs == "" {
		return event.CondUp
	}
	return k.Needs
}

// Undoer returns the kind that undoes condition c (its Needs is c), if any.
func Undoer(c event.Condition) (*Kind, bool) {
	if c == event.CondUp {
		return nil, false
	}
	for _, k := range Kinds() {
		if k.needs() == c {
			return k, true
		}
	}
	return nil, false
}

// Refused is an action refused by its kind's rule (Refusal over the
// source's condition, or RankRefusal), as the run's one check answers it
// (the experiment's): a dashboard key shows it as the key's answer, words
// and all, and a run records it only for a script. Arm names the arm that
// refused, in a run of several ("" in a run of one).
type Refused struct {
	Arm string
	Err error
}

func (r *Refused) Error() string {
	if r.Arm == "" {
		return r.Err.Error()
	}
	return r.Arm + ": " + r.Err.Error()
}

func (r *Refused) Unwrap() error { return r.Err }

// RefusalsIn lists the refusals in err's tree (a run of several arms
// joins one per arm that refused), in order.
func RefusalsIn(err error) []*Refused {
	switch e := err.(type) {
	case nil:
		return nil
	case *Refused:
		return []*Refused{e}
	case interface{ Unwrap() []error }:
		var out []*Refused
		for _, c := range e.Unwrap() {
			out = append(out, RefusalsIn(c)...)
		}
		return out
	case interface{ Unwrap() error }:
		return RefusalsIn(e.Unwrap())
	}
	return nil
}

// Refusal is the one answer to "may kind k act on the source named name,
// in condition c, now?": "" when it may, else why not, in the words every
// caller shows (a dashboard key, a scripted step, an attached source's
// action). A kind acts only in the condition it needs; the words name
// the kind that would undo the condition in force, if one has a key. It
// reads only the kinds' declarations, so new kinds get the same rule.
func (k *Kind) Refusal(name string, c event.Condition) string {
	need := k.needs()
	switch {
	case c == need:
		return ""
	case need != event.CondUp:
		return fmt.Sprintf("%s is not %s", name, need)
	case c == event.CondExited:
		return name + " has exited"
	}
	why := fmt.Sprintf("%s is %s", name, c)
	if c == k.Leaves {
		why = fmt.Sprintf("%s is already %s", name, c)
	}
	if u, ok := Undoer(c); ok && u.Key != "" && u.Hint != "" {
		why += fmt.Sprintf("; press %s to %s", u.Key, u.Hint)
	}
	return why
}
