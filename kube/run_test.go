package kube

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/experiment"
)

// TestARunOnThePodsVerifiesEachFaultAndJudgesIt runs the seed's cases a
// pod can take on the kwok cluster, as `slice --kube` does row by row: the
// fault goes through the API server, its verification reads the pod's
// processes by exec, and the verdict comes out of the simulated engines.
func TestARunOnThePodsVerifiesEachFaultAndJudgesIt(t *testing.T) {
	needPlane(t)
	for _, tt := range []struct{ kind, sources, detail string }{
		{"stall", "llm-d.ai/role=prefill", "frozen: every process of it stopped; stopped "},
		{"kill", "llm-d.ai/role=prefill", " ready"},
		{"replace", "llm-d.ai/role=replica", " ready at 127.0.0.1:"},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			resumeOnHost(t)
			enginesUp(t)
			exp, err := experiment.New(experiment.Config{
				Case: tt.kind, TimeScale: 0.25, OutDir: t.TempDir(),
				Cluster: Opener{Config: testConfig(tt.sources)},
			})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var verified []event.Verification
			evs := exp.Subscribe()
			go func() {
				for ev := range evs {
					if ev.Kind == event.KindVerification {
						mu.Lock()
						verified = append(verified, *ev.Verification)
						mu.Unlock()
					}
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			v, err := exp.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			found := false
			for _, vf := range verified {
				t.Logf("verification: %s %v %s", vf.Action, vf.Verified, vf.Detail)
				if vf.Action == tt.kind && vf.Verified && strings.Contains(vf.Detail, tt.detail) {
					found = true
				}
			}
			if !found {
				t.Errorf("no verified %s naming %q", tt.kind, tt.detail)
			}
			// The checks are logged, not judged: on the real clock under
			// load their bounds (fault_took_effect's 2 s included) measure
			// the machine; the verification above is the mechanism.
			for _, c := range v.Checks {
				t.Logf("check %s: %v %s", c.Name, c.Passed, c.Detail)
			}
			if n := labelledPolicies(t); n != 0 || podLabelled(t, "src-a", LabelStalled) {
				t.Errorf("after the run: %d labelled policies, stalled mark %v", n, podLabelled(t, "src-a", LabelStalled))
			}
		})
	}
}
