package experiment

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"p2pfault/exitcode"
	"p2pfault/fault"
)

// noCluster plans one source and opens none: its Run ends at the start.
type noCluster struct{}

func (noCluster) Plan(fault.Timeline) (Plan, error) {
	return Plan{Sources: 1, Model: "m", Engine: "sim"}, nil
}

func (noCluster) Open(context.Context, OpenEnv) (Cluster, error) {
	return nil, errors.New("no cluster here")
}

// TestAFiringReadsTheRunsContextAsRunSetsIt: a kind's Env.Context and
// the wait for a verification read the run's context while Run sets it
// (a key may fire as the run starts). Under -race an unguarded read is
// reported, whoever wins.
func TestAFiringReadsTheRunsContextAsRunSetsIt(t *testing.T) {
	e, err := New(Config{Cluster: noCluster{}, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := &firing{e: e}
	verified := make(chan struct{})
	close(verified)
	ran := make(chan struct{})
	go func() { defer close(ran); _, _ = e.Run(context.Background()) }()
	for f.Context() == nil {
		runtime.Gosched()
	}
	for range 100 {
		e.awaitVerify(verified)
		if f.Context() == nil {
			t.Fatal("the run's context went back to nil")
		}
	}
	<-ran
	if f.Context().Err() == nil {
		t.Error("the run's context is not ended after Run returned")
	}
}

// shapingCluster plans like noCluster, as a cluster whose targets shape
// their packets themselves (Kubernetes' NetworkChaos).
type shapingCluster struct{ noCluster }

func (shapingCluster) Plan(fault.Timeline) (Plan, error) {
	return Plan{Sources: 1, Model: "m", Engine: "sim", OwnNetwork: true, ShapesLinks: true}, nil
}

// TestLinkIsRefusedOnAClusterThatShapesItsPackets: --link asks for
// p2pfault's links, which such a cluster cannot run: a usage error naming
// --link, before anything starts; without it the run is set up.
func TestLinkIsRefusedOnAClusterThatShapesItsPackets(t *testing.T) {
	_, err := New(Config{Cluster: shapingCluster{}, OutDir: t.TempDir(), Link: true})
	if err == nil || !strings.Contains(err.Error(), "--link") || exitcode.Code(err) != exitcode.Usage {
		t.Fatalf("--link on a shaping cluster: %v, want a usage error naming --link", err)
	}
	if _, err := New(Config{Cluster: shapingCluster{}, OutDir: t.TempDir()}); err != nil {
		t.Fatalf("without --link: %v", err)
	}
}

// linklessCluster plans like noCluster, as a cluster whose links p2pfault
// cannot make (an attach file that does not give the decoder's P2P
// address).
type linklessCluster struct{ noCluster }

func (linklessCluster) Plan(fault.Timeline) (Plan, error) {
	return Plan{Sources: 1, Model: "m", Engine: "attached", NoLinks: "attach a.yaml: decoder.p2p: missing"}, nil
}

// TestARunThatNeedsLinksIsRefusedWhereNoneCanBeMade: --link, a link kind
// in the timeline and a link preset case are each a usage error naming
// --link and why (the plan's NoLinks), before anything starts; a run with
// no link is set up.
func TestARunThatNeedsLinksIsRefusedWhereNoneCanBeMade(t *testing.T) {
	for _, cfg := range []Config{{Link: true}, {Timeline: "at 1s mute source-0 for 1s"}, {Case: fault.CaseHalfOpen}} {
		cfg.Cluster, cfg.OutDir = linklessCluster{}, t.TempDir()
		_, err := New(cfg)
		if err == nil || exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "--link") || !strings.Contains(err.Error(), "decoder.p2p: missing") {
			t.Errorf("link %v, timeline %q, case %q: %v, want a usage error naming --link and decoder.p2p", cfg.Link, cfg.Timeline, cfg.Case, err)
		}
	}
	if _, err := New(Config{Cluster: linklessCluster{}, OutDir: t.TempDir(), Timeline: "at 1s stall source-0 for 1s"}); err != nil {
		t.Fatalf("a stall with no link: %v", err)
	}
}
