package sim

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/internal/syncbuf"
	"p2pfault/memnet"
)

// vcluster is engines in process on one memnet fabric, for a test inside a
// synctest bubble: time is the bubble's fake clock, so a figure that comes
// from the engines' deadlines is exact, whatever the machine's load.
type vcluster struct {
	t       testing.TB
	fab     *memnet.Fabric
	client  *memnet.Host // the test's own HTTP client
	tr      *http.Transport
	c       *http.Client
	engines []*vengine
}

// vengine is one in-process engine, and the engineProc view of it that
// seed, pull and warm take (name, url, P2P identity, log).
type vengine struct {
	*engineProc
	p     *InProcess
	hosts *Hosts
	args  []string
	env   map[string]string
}

func newVCluster(t testing.TB) *vcluster {
	fab := memnet.New(1)
	vc := &vcluster{t: t, fab: fab, client: fab.Host("client")}
	vc.tr = &http.Transport{DialContext: vc.client.DialContext, MaxIdleConnsPerHost: 64, DisableCompression: true}
	vc.c = &http.Client{Timeout: 120 * time.Second, Transport: vc.tr}
	// Every goroutine of the bubble must end before it does: the engines
	// and the client's idle connections.
	t.Cleanup(func() {
		for _, e := range vc.engines {
			e.p.Kill()
			<-e.p.Done()
		}
		vc.tr.CloseIdleConnections()
		if t.Failed() {
			for _, e := range vc.engines {
				t.Logf("%s log:\n%s", e.name, e.log)
			}
		}
	})
	return vc
}

// serveArgs is the `sim serve` command line of o (what follows "sim
// serve"): a process's (startEngine) and an in-process engine's.
func serveArgs(o engineOpts) []string {
	args := []string{"m", "--port", "0", "--block-size", "128", "--max-model-len", "512",
		"--enable-prompt-tokens-details", "--sim-startup-delay", "0"}
	if !o.noP2P {
		args = append(args, "--kv-transfer-config", kvConfig)
	}
	if o.mode != "" {
		args = append(args, "--p2p-pending-handshake", o.mode)
	}
	if o.scale != "" {
		args = append(args, "--sim-time-scale", o.scale)
	}
	return append(args, o.args...)
}

// start starts an engine on hosts of its own and waits until it is ready.
func (vc *vcluster) start(name string, o engineOpts) *vengine {
	vc.t.Helper()
	env := map[string]string{"PYTHONHASHSEED": "42"}
	for _, kv := range o.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	e := &vengine{engineProc: &engineProc{name: name, log: &syncbuf.Buffer{}}, hosts: NewHosts(vc.fab, name), args: serveArgs(o), env: env}
	vc.engines = append(vc.engines, e)
	vc.run(e, e.args)
	return e
}

// run starts e's engine with args and waits for it to be ready.
func (vc *vcluster) run(e *vengine, args []string) {
	vc.t.Helper()
	p, err := StartInProcess(context.Background(), args, e.env, e.hosts, e.log)
	if err != nil {
		vc.t.Fatalf("start %s: %v", e.name, err)
	}
	e.p = p
	select {
	case <-p.Ready():
	case <-p.Done():
		vc.t.Fatalf("%s exited before ready (%v):\n%s", e.name, p.Err(), e.log)
	}
	e.url = "http://" + p.HTTPAddr()
	if h, port, ok := strings.Cut(p.P2PAddr(), ":"); ok {
		e.p2pHost = h
		e.p2pPort, _ = strconv.Atoi(port)
	}
}

// restart starts e again on the same hosts and ports, after its exit.
func (vc *vcluster) restart(e *vengine) {
	vc.t.Helper()
	<-e.p.Done()
	_, httpPort, _ := strings.Cut(strings.TrimPrefix(e.url, "http://"), ":")
	args := append([]string(nil), e.args...)
	for i := range args {
		switch {
		case args[i] == "--port":
			args[i+1] = httpPort
		case args[i] == "--kv-transfer-config":
			args[i+1] = strings.Replace(args[i+1], `"port":0`, `"port":`+strconv.Itoa(e.p2pPort), 1)
		}
	}
	vc.run(e, args)
}
