package fault

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"p2pfault/event"
	"p2pfault/load"
	"p2pfault/netenv"
)

// ActionBusy keeps a source's scheduler busy for a duration with
// p2pfault's own load (package load): many long prompts sent straight to
// it, so every P2P lookup it serves waits behind long model steps, the
// way production stalls a source with no signal at all (vLLM #55179):
// `busy source-0 for 30s`, `busy 32x2000 source-0 for 30s`.
const ActionBusy = "busy"

// CondBusy: a source under a busy fault's load.
const CondBusy event.Condition = "busy"

// busyArg names the word busy takes, in messages.
const busyArg = "a load such as 16 or 16x2000 (requests at once, x prompt tokens)"

func init() {
	Register(&Kind{
		Name: ActionBusy, Key: "b", Help: "busy", LongHelp: "busy (load it)", Order: 68, MoreHelp: true,
		TakesFor: true, NeedsFor: true,
		Arg:   &Arg{Name: busyArg, Optional: true, Check: func(s string) error { _, err := ParseBusy(s); return err }},
		Needs: event.CondUp, Leaves: CondBusy, Badge: "BUSY",
		Opens: true, Ending: EndsAfterFor,
		Act: actBusy, Verify: verifyBusy, Can: canBusy,
	})
}

// BusyLoad is what a busy fault sends: Concurrency requests at once, each
// a prompt of PromptTokens tokens (0: the longest the source allows).
type BusyLoad struct {
	Concurrency  int
	PromptTokens int
}

// ParseBusy reads busy's word: "" (the defaults), "N" (N requests at
// once, prompts as long as the source allows) or "NxT" (and prompts of T
// tokens), N and T whole numbers from 1.
func ParseBusy(s string) (BusyLoad, error) {
	l := BusyLoad{Concurrency: load.DefaultConcurrency}
	if s == "" {
		return l, nil
	}
	n, t, hasT := strings.Cut(s, "x")
	whole := func(w, what string) (int, error) {
		v, err := strconv.Atoi(w)
		if err != nil || v < 1 || w != strconv.Itoa(v) {
			return 0, fmt.Errorf("want %s: %s %q is not a whole number from 1", busyArg, what, w)
		}
		return v, nil
	}
	var err error
	if l.Concurrency, err = whole(n, "requests at once"); err != nil {
		return BusyLoad{}, err
	}
	if hasT {
		if l.PromptTokens, err = whole(t, "prompt tokens"); err != nil {
			return BusyLoad{}, err
		}
	}
	return l, nil
}

// Loadable is a Target whose HTTP front end p2pfault can reach: a kind's
// own load is sent there.
type Loadable interface {
	HTTPURL() string
}

// LoadEnv is an Env whose run can send a kind's own load to the fired
// source and read that source's /metrics (busy). The busy kind
// type-asserts its Env to it; a run without one refuses it.
type LoadEnv interface {
	Env
	// LoadTarget is how to reach the fired source: the model it serves and
	// the network its cluster is reached on (nil: the OS's).
	LoadTarget() (model string, nw netenv.Network)
	// SourceMetrics reads the fired source's /metrics once.
	SourceMetrics(ctx context.Context) (event.Reading, error)
	// Loaded reports the load on the fired source (its load event), begun
	// at start and ended at end (zero while it runs).
	Loaded(info event.LoadInfo, start, end time.Time)
}

func canBusy(t Target) error {
	if _, ok := t.(Loadable); !ok {
		return fmt.Errorf("p2pfault does not know the HTTP address of %s, where its load would go", t.Name())
	}
	return nil
}

// busy is a busy fault in force: its load and what the source's queues
// were before it began (for Verify).
type busy struct {
	load     BusyLoad
	before   event.Reading
	beforeOK string // "" when before was read, else why not
}

// actBusy starts the load on the target; it stops at For's end (or the
// run's), every request of it in flight cancelled, and the window closes
// then.
func actBusy(f *Fire) error {
	env := f.Env
	g, le, spec, err := busyLoad(f)
	if err != nil {
		err = fmt.Errorf("busy %s: %w", f.Target.Name(), err)
		env.Record(ActionBusy, f.For, f.By, err)
		return err
	}
	b := &busy{load: spec}
	if b.before, err = le.SourceMetrics(env.Context()); err != nil {
		b.beforeOK = err.Error()
	}
	cfg := g.Config()
	ctx, cancel := context.WithTimeout(env.Context(), f.For)
	start := time.Now()
	env.Hold(b)
	f.Enter()
	env.Record(ActionBusy, f.For, f.By, nil)
	env.OpenWindow(start, true)
	env.Changed()
	info := event.LoadInfo{Kind: ActionBusy, Concurrency: cfg.Concurrency, PromptTokens: cfg.PromptTokens, MaxTokens: cfg.MaxTokens}
	env.Go(func() {
		defer cancel()
		var mu sync.Mutex // progress and the final report are one sequence
		st := g.Run(ctx, time.Second, func(s load.Stats) {
			mu.Lock()
			defer mu.Unlock()
			if ctx.Err() == nil {
				info.LoadCounts = s.Info()
				le.Loaded(info, start, time.Time{})
			}
		})
		// The window ends when the load's time is up, not when the last
		// cancelled request has unwound.
		end := time.Now()
		if due := start.Add(f.For); due.Before(end) {
			end = due
		}
		mu.Lock()
		info.LoadCounts, info.Final = st.Info(), true
		le.Loaded(info, start, end)
		mu.Unlock()
		env.Hold(nil)
		f.Lift()
		env.CloseWindow(end)
		env.Changed()
	})
	return nil
}

// busyLoad is the generator a firing sends, ready (its prompt length fixed
// from what the source allows), or why there is none.
func busyLoad(f *Fire) (*load.Generator, LoadEnv, BusyLoad, error) {
	spec, err := ParseBusy(f.Arg)
	if err != nil {
		return nil, nil, spec, err
	}
	if f.For <= 0 {
		return nil, nil, spec, fmt.Errorf(`busy needs a duration ("for DURATION"): nothing else ends its load`)
	}
	le, ok := f.Env.(LoadEnv)
	if !ok {
		return nil, nil, spec, fmt.Errorf("this run cannot send load to a source")
	}
	if err := canBusy(f.Target); err != nil {
		return nil, nil, spec, err
	}
	model, nw := le.LoadTarget()
	g, err := load.New(load.Config{URL: f.Target.(Loadable).HTTPURL(), Model: model, Network: nw,
		Concurrency: spec.Concurrency, PromptTokens: spec.PromptTokens})
	if err != nil {
		return nil, nil, spec, err
	}
	if err := g.Prepare(f.Env.Context()); err != nil {
		return nil, nil, spec, err
	}
	return g, le, spec, nil
}

// verifyBusy: the source's own /metrics show the load queued on it: its
// requests running and waiting rose, from before the load, by at least
// half the load's requests at once (the rest may be on the wire between
// one request's end and the next's start).
func verifyBusy(f *Fire) Effect {
	le, ok := f.Env.(LoadEnv)
	b, held := f.Env.Held().(*busy)
	if !ok || !held {
		return Effect{Skipped: true}
	}
	return effect(f.Verifier.Until(f.Env.Context(), ActionBusy, func(ctx context.Context) (bool, string) {
		r, err := le.SourceMetrics(ctx)
		if err != nil {
			return false, fmt.Sprintf("the /metrics of %s: %v", f.Target.Name(), err)
		}
		return QueuesRose(f.Target.Name(), b.before, b.beforeOK, r, b.load.Concurrency)
	}))
}

// QueuesRose says whether a source's queues (requests running plus
// waiting, as its /metrics report them) rose from before to now by at
// least half of want, a load's requests at once, and what was seen. A
// reading that was not taken before (why says why) counts as empty
// queues.
func QueuesRose(name string, before event.Reading, why string, now event.Reading, want int) (bool, string) {
	if !now.Running.OK && !now.Waiting.OK {
		return false, fmt.Sprintf("%s exports neither vllm:num_requests_running nor _waiting", name)
	}
	q := func(r event.Reading) float64 { return r.Running.V + r.Waiting.V }
	was := "before"
	if why != "" {
		was = "before (not read: " + why + "; taken as 0)"
	}
	need := float64((want + 1) / 2)
	detail := fmt.Sprintf("%s: running %s, waiting %s; %s running %s, waiting %s (a load of %d at once needs a rise of %.0f)",
		name, now.Running, now.Waiting, was, before.Running, before.Waiting, want, need)
	return q(now)-q(before) >= need, detail
}
