package fault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// goneLog is what gone did, in order: its cuts, heals and kills.
type goneLog struct{ steps []string }

func (l *goneLog) add(format string, a ...any) { l.steps = append(l.steps, fmt.Sprintf(format, a...)) }

// goneNet is a Network that logs its calls.
type goneNet struct{ log *goneLog }

func (n goneNet) Partition(target string, ports ...int) error {
	n.log.add("partition %s %v", target, ports)
	return nil
}
func (n goneNet) Loss(target string, pct int, ports ...int) error {
	n.log.add("loss %s %d %v", target, pct, ports)
	return nil
}
func (n goneNet) Heal(target string) error { n.log.add("heal %s", target); return nil }

// goneSource is a source of two ranks (HTTP 8100, P2P 7777 and 7778)
// whose core kills log, failing with crashErr.
type goneSource struct {
	namedTarget
	log      *goneLog
	crashErr error
}

func (s goneSource) Ports() []int    { return []int{8100, 7777, 7778} }
func (s goneSource) P2PAddr() string { return "127.0.0.1:7777" }
func (s goneSource) RankTarget(r int) (Target, error) {
	return goneRank{namedTarget{event.RankName(0, r)}, 7777 + r}, nil
}
func (s goneSource) CrashCore(_ context.Context, r int) (time.Time, error) {
	s.log.add("crash core %d", r)
	return time.Now(), s.crashErr
}

type goneRank struct {
	namedTarget
	port int
}

func (r goneRank) Ports() []int    { return []int{r.port} }
func (r goneRank) P2PAddr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// goneEnv is an Env with the network, logging what the kind records.
type goneEnv struct {
	log *goneLog
	nw  goneNet
}

func (e *goneEnv) Network() (Network, error)    { return e.nw, nil }
func (e *goneEnv) Context() context.Context     { return context.Background() }
func (e *goneEnv) OpenWindow(time.Time, bool)   { e.log.add("window") }
func (e *goneEnv) CloseWindow(time.Time)        {}
func (e *goneEnv) SetCondition(event.Condition) {}
func (e *goneEnv) Hold(any)                     {}
func (e *goneEnv) Held() any                    { return nil }
func (e *goneEnv) Go(fn func())                 { fn() }
func (e *goneEnv) Fail(error)                   {}
func (e *goneEnv) Changed()                     {}
func (e *goneEnv) Verified(string, Effect)      {}
func (e *goneEnv) Record(action string, _ time.Duration, _ string, err error) {
	e.log.add("record %s %v", action, err != nil)
}

// TestGoneCutsTheSiblingsBeforeTheKillAndAllAfter: gone cuts every port of
// the source but rank 0's P2P port, kills rank 0's core (which returns
// once it is dead), then cuts every port under the same name (the
// firewall replaces the first cut), and opens its window; a kill that
// fails heals the first cut and records the error.
func TestGoneCutsTheSiblingsBeforeTheKillAndAllAfter(t *testing.T) {
	for _, tt := range []struct {
		name     string
		crashErr error
		want     []string
	}{
		{name: "ok", want: []string{
			"partition source-0 [8100 7778]", "crash core 0", "partition source-0 [8100 7777 7778]",
			"record gone false", "window"}},
		{name: "kill fails", crashErr: errors.New("no such process"), want: []string{
			"partition source-0 [8100 7778]", "crash core 0", "heal source-0", "record gone true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := &goneLog{}
			env := &goneEnv{log: log, nw: goneNet{log}}
			k, _ := Lookup(ActionGone)
			src := goneSource{namedTarget{"source-0"}, log, tt.crashErr}
			err := k.Act(&Fire{Kind: k, Target: src, By: "script", Env: env})
			if (err != nil) != (tt.crashErr != nil) {
				t.Errorf("Act: %v, want an error %v", err, tt.crashErr != nil)
			}
			if got := strings.Join(log.steps, "; "); got != strings.Join(tt.want, "; ") {
				t.Errorf("gone did\n  %s\nwant\n  %s", got, strings.Join(tt.want, "; "))
			}
		})
	}
}
