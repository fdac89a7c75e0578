package sim

import (
	"net/http"
	"testing"
	"testing/synctest"
)

func TestInProcessPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t)
		src := vc.start("source", engineOpts{})
		dec := vc.start("decoder", engineOpts{})
		p := words("inproc", 400)
		seed(t, vc.c, src.engineProc, p)
		r := pull(vc.c, dec.engineProc, src.engineProc, p)
		if r.err != nil || r.status != http.StatusOK || r.cached == 0 {
			t.Fatalf("pull over memnet: status %d cached %d err %v body %s", r.status, r.cached, r.err, r.body)
		}
		t.Logf("pull: cached %d of %d in %s", r.cached, r.prompt, r.latency)
	})
}
