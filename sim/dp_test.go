package sim

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// dpKVConfig is kvConfig with the P2P base port fixed, so each rank's
// port is known: rank r binds base + r.
func dpKVConfig(base int) string {
	return strings.Replace(kvConfig, `"port":0`, `"port":`+strconv.Itoa(base), 1)
}

func rankHeader(r string) http.Header { return http.Header{"X-Data-Parallel-Rank": {r}} }

// dpPull asks the decoder for prompt naming one rank's P2P port.
func dpPull(c *http.Client, dec *engineProc, host string, port int, prompt string) result {
	return postCompletion(c, dec.url, map[string]any{
		"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0,
		"kv_transfer_params": map[string]any{"remote_kv_source": map[string]any{
			"kv_request_id": fmt.Sprintf("dp-pull-%d", pullSeq.Add(1)), "remote_host": host, "remote_port": port,
		}},
	})
}

// rankSuccesses reads each rank's vllm:request_success_total (length) from
// an engine's /metrics.
func rankSuccesses(t *testing.T, c *http.Client, url string, ranks int) []int {
	t.Helper()
	resp, err := c.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read /metrics: %v", err)
	}
	out := make([]int, ranks)
	for r := range out {
		re := regexp.MustCompile(`vllm:request_success_total\{model_name="m",engine="` + strconv.Itoa(r) + `",finished_reason="length"\} (\d+)`)
		m := re.FindSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics has no success count for engine %d:\n%s", r, body)
		}
		out[r], _ = strconv.Atoi(string(m[1]))
	}
	return out
}

// TestVirtualDataParallelRanks: a source with --data-parallel-size 2 binds
// rank r's P2P port at base + r, each rank has its own CPU tier (a prompt
// seeded on rank 1 is pulled from rank 1's port and misses on rank 0's),
// the decoder keeps one session per rank's address, a bad rank header is
// a 400 naming it, and requests without the header alternate between the
// idle ranks (vLLM's DPLB scan, which starts one rank further each pick).
func TestVirtualDataParallelRanks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t)
		src := vc.start("source", engineOpts{noP2P: true, args: []string{"--kv-transfer-config", dpKVConfig(7777), "--data-parallel-size", "2"}})
		dec := vc.start("decoder", engineOpts{})
		if got, want := strings.Join(src.p.P2PAddrs(), " "), "127.0.0.1:7777 127.0.0.1:7778"; got != want {
			t.Fatalf("P2P identities by rank: %q, want %q", got, want)
		}
		c := vc.c
		seedOn := func(rank, prompt string) {
			r := postCompletionWith(c, src.url, map[string]any{"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0}, rankHeader(rank))
			if r.status != http.StatusOK {
				t.Fatalf("seed on rank %s: %d %s", rank, r.status, r.body)
			}
		}
		a, b, onlyOne := words("dp-a", 400), words("dp-b", 400), words("dp-only-rank-1", 400)
		seedOn("1", a)
		seedOn("0", b)
		seedOn("1", onlyOne)
		if r := dpPull(c, dec.engineProc, "127.0.0.1", 7778, a); r.status != http.StatusOK || r.cached != 384 {
			t.Errorf("pull of rank 1's prompt from :7778: %d cached %d, want 384: %s", r.status, r.cached, r.body)
		}
		if r := dpPull(c, dec.engineProc, "127.0.0.1", 7777, b); r.status != http.StatusOK || r.cached != 384 {
			t.Errorf("pull of rank 0's prompt from :7777: %d cached %d, want 384: %s", r.status, r.cached, r.body)
		}
		if r := dpPull(c, dec.engineProc, "127.0.0.1", 7777, onlyOne); r.status != http.StatusOK || r.cached != 0 {
			t.Errorf("pull of a prompt only rank 1 holds from rank 0's :7777: %d cached %d, want a miss (own CPU tier per rank): %s", r.status, r.cached, r.body)
		}
		for _, peer := range []string{"127.0.0.1:7777", "127.0.0.1:7778"} {
			if n := strings.Count(dec.log.String(), "peer "+peer+" connected"); n != 1 {
				t.Errorf("decoder connected %d times to %s, want one session per rank's address:\n%s", n, peer, dec.log)
			}
		}
		for _, bad := range []struct{ header, want string }{
			{"2", "X-data-parallel-rank 2: data_parallel_rank 2 is out of range [0, 2)."},
			{"-1", "data_parallel_rank -1 is out of range [0, 2)."},
			{"one", `X-data-parallel-rank \"one\": data_parallel_rank must be an integer in [0, 2)`},
		} {
			r := postCompletionWith(c, src.url, map[string]any{"model": "m", "prompt": "x", "max_tokens": 1}, rankHeader(bad.header))
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, bad.want) {
				t.Errorf("rank header %q: %d %s, want 400 naming %q", bad.header, r.status, r.body, bad.want)
			}
		}
		before := rankSuccesses(t, c, src.url, 2)
		if before[0] != 1 || before[1] != 2 {
			t.Errorf("successes by rank after the pinned seeds: %v, want [1 2]", before)
		}
		for i := range 4 {
			if r := postCompletion(c, src.url, map[string]any{"model": "m", "prompt": words(fmt.Sprint("dp-lb-", i), 200), "max_tokens": 1}); r.status != http.StatusOK {
				t.Fatalf("unpinned request %d: %d %s", i, r.status, r.body)
			}
		}
		after := rankSuccesses(t, c, src.url, 2)
		if after[0]-before[0] != 2 || after[1]-before[1] != 2 {
			t.Errorf("4 unpinned requests on idle ranks went %d to rank 0 and %d to rank 1, want 2 and 2", after[0]-before[0], after[1]-before[1])
		}
	})
}

// TestVirtualDataParallelBalancesByLoad: with rank 0 busy (requests held on
// it), an unpinned request goes to the less loaded rank 1 whatever the
// scan's start.
func TestVirtualDataParallelBalancesByLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		vc := newVCluster(t)
		src := vc.start("source", engineOpts{args: []string{"--data-parallel-size", "2", "--sim-decode-per-token", "100ms"}})
		c := vc.c
		// Two long requests pinned to rank 0 (each decodes 40 tokens: 4 s).
		done := make(chan result, 2)
		for i := range 2 {
			go func() {
				done <- postCompletionWith(c, src.url, map[string]any{"model": "m", "prompt": words(fmt.Sprint("busy-", i), 100), "max_tokens": 40}, rankHeader("0"))
			}()
		}
		time.Sleep(time.Second)
		for i := range 3 {
			if r := postCompletion(c, src.url, map[string]any{"model": "m", "prompt": words(fmt.Sprint("free-", i), 100), "max_tokens": 1}); r.status != http.StatusOK {
				t.Fatalf("unpinned request %d: %d %s", i, r.status, r.body)
			}
		}
		for range 2 {
			if r := <-done; r.status != http.StatusOK {
				t.Fatalf("busy request: %d %s", r.status, r.body)
			}
		}
		if got := rankSuccesses(t, c, src.url, 2); got[0] != 2 || got[1] != 3 {
			t.Errorf("successes by rank: %v, want [2 3] (every unpinned request on the idle rank 1)", got)
		}
	})
}

// dpCores maps each rank to its engine-core pid, found as a tool would:
// the session's members whose command line holds --data-parallel-rank R.
func dpCores(t *testing.T, e *engineProc, ranks int) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, pid := range e.members(t) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == coreRankFlag {
				r, err := strconv.Atoi(args[i+1])
				if err != nil {
					t.Fatalf("pid %d: %s %q", pid, coreRankFlag, args[i+1])
				}
				out[r] = pid
			}
		}
	}
	if len(out) != ranks {
		t.Fatalf("engine cores by rank: %v, want %d ranks (session members %v)", out, ranks, e.members(t))
	}
	return out
}

// TestVirtualDataParallelRankStall: SIGSTOP of rank 1's core alone
// (FreezeRank: its host frozen, the front end's and rank 0's not). The
// front end and rank 0 run on: a request pinned to rank 0 completes and a
// pull from rank 0's P2P port hits, at their usual cost. Rank 1 takes no
// step: a request pinned to it waits in its link and completes only after
// the thaw, and a pull from its port misses when the lookup deadline reaps
// its session (L after the core's last frame, at most a heartbeat interval
// before the freeze), as a whole source's stall does (TestVirtualStallOfASource).
func TestVirtualDataParallelRankStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stallFor = 30 * time.Second
		vc := newVCluster(t)
		src := vc.start("source", engineOpts{noP2P: true, args: []string{"--kv-transfer-config", dpKVConfig(7777), "--data-parallel-size", "2"}})
		dec := vc.start("decoder", engineOpts{})
		c := vc.c
		seedOn := func(rank, prompt string) {
			t.Helper()
			if r := postCompletionWith(c, src.url, map[string]any{"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0}, rankHeader(rank)); r.status != http.StatusOK {
				t.Fatalf("seed on rank %s: %d %s", rank, r.status, r.body)
			}
		}
		// Sessions with both ranks, handshaken by a hit each.
		for r, port := range []int{7777, 7778} {
			p := words(fmt.Sprint("rank-stall-warm-", r), 400)
			seedOn(strconv.Itoa(r), p)
			if res := dpPull(c, dec.engineProc, "127.0.0.1", port, p); res.status != http.StatusOK || res.cached != 384 {
				t.Fatalf("warm-up pull from :%d: %d cached %d %s", port, res.status, res.cached, res.body)
			}
		}
		on0, on1 := words("rank-stall-0", 400), words("rank-stall-1", 400)
		seedOn("0", on0)
		seedOn("1", on1)

		if err := src.p.FreezeRank(1); err != nil {
			t.Fatal(err)
		}
		if err := src.p.FreezeRank(2); err == nil || !strings.Contains(err.Error(), "stop rank 2: the engine has 2 data-parallel ranks") {
			t.Errorf("FreezeRank(2) = %v, want an error naming the rank and the engine's ranks", err)
		}
		frozen := time.Now()
		pinned1 := make(chan result, 1)
		go func() {
			pinned1 <- postCompletionWith(c, src.url, map[string]any{"model": "m", "prompt": words("rank-stall-pinned-1", 100), "max_tokens": 1}, rankHeader("1"))
		}()
		pull1 := make(chan result, 1)
		go func() { pull1 <- dpPull(c, dec.engineProc, "127.0.0.1", 7778, on1) }()

		p0 := postCompletionWith(c, src.url, map[string]any{"model": "m", "prompt": words("rank-stall-pinned-0", 100), "max_tokens": 1}, rankHeader("0"))
		if p0.status != http.StatusOK || p0.latency > vMissCost {
			t.Errorf("request pinned to rank 0 with rank 1 stopped: %d in %v %v %s, want 200 within %v", p0.status, p0.latency, p0.err, p0.body, vMissCost)
		}
		h0 := dpPull(c, dec.engineProc, "127.0.0.1", 7777, on0)
		if h0.status != http.StatusOK || h0.cached != 384 || h0.latency > vHitCost {
			t.Errorf("pull from rank 0's :7777 with rank 1 stopped: %d cached %d in %v %s, want a hit of 384 within %v", h0.status, h0.cached, h0.latency, h0.body, vHitCost)
		}
		m1 := <-pull1
		if reap := m1.latency - vMissCost; m1.status != http.StatusOK || m1.cached != 0 || reap < vLookupTO-vHeartbeatIvl-2*vTick || reap > vLookupTO {
			t.Errorf("pull from the stopped rank 1's :7778: %d cached %d in %v %s, want a miss at the lookup deadline, reaped in [%v, %v]", m1.status, m1.cached, m1.latency, m1.body, vLookupTO-vHeartbeatIvl, vLookupTO)
		}
		time.Sleep(time.Until(frozen.Add(stallFor)))
		select {
		case r := <-pinned1:
			t.Fatalf("the request pinned to the stopped rank 1 ended while it was stopped: %d in %v %s", r.status, r.latency, r.body)
		default:
		}
		if err := src.p.ThawRank(1); err != nil {
			t.Fatal(err)
		}
		p1 := <-pinned1
		if p1.status != http.StatusOK || p1.latency < stallFor || p1.latency > stallFor+vMissCost {
			t.Errorf("request pinned to rank 1 across its stall: %d in %v %s, want 200 right after the thaw, %v in", p1.status, p1.latency, p1.body, stallFor)
		}
		t.Logf("rank 1 stopped %v: pinned to rank 0 %v; pull from rank 0 cached %d in %v; pull from rank 1 cached %d in %v; pinned to rank 1 %v",
			stallFor, p0.latency, h0.cached, h0.latency, m1.cached, m1.latency, p1.latency)
	})
}

// TestDataParallelCoresAreProcessesByRank: --data-parallel-size 2 runs a
// front end and two core processes in one session, each core naming its
// rank on its command line; SIGSTOP of rank 1's core stops rank 1 only
// (rank 0 answers, rank 1 does not until SIGCONT); SIGKILL of rank 1's core
// ends the whole engine, as vLLM's engine-core monitor does.
func TestDataParallelCoresAreProcessesByRank(t *testing.T) {
	e := startEngine(t, "source", engineOpts{args: []string{"--data-parallel-size", "2"}})
	if n := len(e.members(t)); n != 3 {
		t.Fatalf("session has %d processes, want a front end and 2 cores", n)
	}
	cores := dpCores(t, e, 2)
	ask := func(rank string, timeout time.Duration) result {
		return postCompletionWith(newClient(timeout), e.url, map[string]any{"model": "m", "prompt": "stop " + rank, "max_tokens": 1}, rankHeader(rank))
	}
	if err := syscall.Kill(cores[1], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitState(t, "T", cores[1])
	if st := procState(t, cores[0]); st == "T" {
		t.Errorf("rank 0's core is stopped too")
	}
	if r := ask("0", 10*time.Second); r.status != http.StatusOK {
		t.Errorf("rank 0 with rank 1 stopped: %d %v %s, want 200", r.status, r.err, r.body)
	}
	// Rank 1 takes no step while stopped: the request waits (a margin of
	// 1 s against a step of 5 ms).
	if r := ask("1", time.Second); r.err == nil {
		t.Errorf("rank 1 answered while its core was stopped: %d %s", r.status, r.body)
	}
	if err := syscall.Kill(cores[1], syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if r := ask("1", 10*time.Second); r.status != http.StatusOK {
		t.Errorf("rank 1 after SIGCONT: %d %v %s, want 200", r.status, r.err, r.body)
	}
	if err := syscall.Kill(cores[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the front end still runs 10 s after rank 1's core was killed")
	}
	waitSessionGone(t, e.pid)
	if !strings.Contains(e.log.String(), "Engine core proc EngineCore_DP1 died unexpectedly") {
		t.Errorf("log lacks vLLM's monitor line for rank 1:\n%s", e.log)
	}
}

// dpPrefill sends a PD prefill leg pinned to one rank, as vLLM's proxy
// does with --prefiller-dp-size.
func dpPrefill(t *testing.T, c *http.Client, pre *engineProc, rank int, id, prompt string) {
	t.Helper()
	r := postCompletionWith(c, pre.url, map[string]any{"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0,
		"kv_transfer_params": map[string]any{"remote_decoder": map[string]any{"kv_request_id": id}}}, rankHeader(strconv.Itoa(rank)))
	if r.status != http.StatusOK {
		t.Fatalf("prefill leg %s on rank %d: %d %s", id, rank, r.status, r.body)
	}
}

// dpDecode sends the decode leg of id naming the rank's P2P port.
func dpDecode(c *http.Client, dec *engineProc, port int, id, prompt string) result {
	return postCompletion(c, dec.url, map[string]any{"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0,
		"kv_transfer_params": map[string]any{"remote_prefiller": map[string]any{"kv_request_id": id, "remote_host": "127.0.0.1", "remote_port": port}}})
}

// goneLeg is one decode leg of goneMidTransfer.
type goneLeg struct {
	rank  int
	id    string
	after time.Duration // since the decode legs start; the fault is at 1 s
}

// goneLegs are #56828's legs: one in flight from each rank at the fault
// and one submitted to the sibling rank a second after it.
var goneLegs = []goneLeg{{0, "gone-r0", 0}, {1, "gone-r1", 0}, {1, "gone-r1-late", 2 * time.Second}}

// goneRun is what goneMidTransfer measured: each leg's result, the fault's
// instant and the engines' logs.
type goneRun struct {
	res            []result
	fault          time.Time
	decLog, preLog string
}

// end is leg i's answer's time after the fault.
func (g goneRun) end(i int) time.Duration { return g.res[i].sent.Add(g.res[i].latency).Sub(g.fault) }

// goneMidTransfer is vLLM issue #56828's layout on the virtual cluster, pd
// mode: a prefiller with two data-parallel ranks goes away while decode
// legs load from both ranks. Rank 0's core dies (its connections reset)
// and the pod's network goes with it (a partition: the other rank's
// connection falls silent, and the engine's shutdown of its other core
// never reaches the decoder). decArgs are the decoder's extra flags. It
// checks what holds in every mode: each leg prefills locally (policy
// recompute), rank 0's leg ends within the second of the fault (#56828:
// "the decoder marked the rank-0 peer down within the second"), the
// prefiller fails with the monitor's line for rank 0.
func goneMidTransfer(t *testing.T, decArgs ...string) goneRun {
	t.Helper()
	var g goneRun
	vc := newVCluster(t)
	kv := strings.Replace(pdKVConfig, `"port":0`, `"port":7777`, 1)
	// 6 MB/s: a 384-token load (12.6 MB) takes 2.1 s, so a fault 1 s
	// after the decode legs catches both mid-transfer.
	pre := vc.start("prefiller", engineOpts{noP2P: true, args: []string{"--kv-transfer-config", kv, "--data-parallel-size", "2", "--sim-transfer-bandwidth", "6e6"}})
	dec := vc.start("decoder", engineOpts{noP2P: true, args: append([]string{"--kv-transfer-config", pdKVConfig}, decArgs...)})
	c := vc.c
	prefill := func(rank int, id, prompt string) { dpPrefill(t, c, pre.engineProc, rank, id, prompt) }
	decode := func(rank int, id, prompt string) result { return dpDecode(c, dec.engineProc, 7777+rank, id, prompt) }
	for r := range 2 {
		p, id := words(fmt.Sprint("gone-warm-", r), 400), fmt.Sprint("gone-warm-", r)
		prefill(r, id, p)
		if w := decode(r, id, p); w.status != http.StatusOK || w.cached != 384 {
			t.Fatalf("warm-up decode leg from rank %d: %d cached %d %s", r, w.status, w.cached, w.body)
		}
	}
	prompts := map[string]string{}
	for _, l := range goneLegs {
		prompts[l.id] = words(l.id, 400)
		prefill(l.rank, l.id, prompts[l.id])
	}
	g.res = make([]result, len(goneLegs))
	done := make(chan int, len(goneLegs))
	for i, l := range goneLegs {
		go func() {
			time.Sleep(l.after)
			g.res[i] = decode(l.rank, l.id, prompts[l.id])
			done <- i
		}()
	}
	time.Sleep(time.Second)
	g.fault = time.Now()
	if err := pre.p.KillRank(0); err != nil {
		t.Fatal(err)
	}
	for _, a := range pre.hosts.All() {
		for _, b := range dec.hosts.All() {
			vc.fab.Partition(a, b)
		}
	}
	for range goneLegs {
		<-done
	}
	for i, l := range goneLegs {
		t.Logf("rank %d decode leg %s: sent %v after the fault, status %d cached %d, latency %v, ended %v after the fault",
			l.rank, l.id, g.res[i].sent.Sub(g.fault), g.res[i].status, g.res[i].cached, g.res[i].latency, g.end(i))
		if g.res[i].status != http.StatusOK || g.res[i].cached != 0 {
			t.Errorf("%s: status %d cached %d, want 200 and a local prefill (policy recompute): %s", l.id, g.res[i].status, g.res[i].cached, g.res[i].body)
		}
	}
	if e := g.end(0); e > time.Second {
		t.Errorf("rank 0's in-flight load ended %v after its core died, want within the second (its connection reset)", e)
	}
	select {
	case <-pre.p.Done():
		if pre.p.Err() == nil {
			t.Errorf("the prefiller exited cleanly after rank 0's core died, want a failure")
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the prefiller still runs 10 s after rank 0's core died")
	}
	g.decLog, g.preLog = dec.log.String(), pre.log.String()
	if !strings.Contains(g.preLog, "Engine core proc EngineCore_DP0 died unexpectedly") {
		t.Errorf("prefiller log lacks the monitor's line for rank 0:\n%s", g.preLog)
	}
	if !strings.Contains(g.decLog, "peer 127.0.0.1:7777 down: connection") || !strings.Contains(g.decLog, "peer 127.0.0.1:7778 down: heartbeat timed out") {
		t.Errorf("decoder log: want rank 0's peer down on the reset and rank 1's on its heartbeat:\n%s", g.decLog)
	}
	return g
}

// TestVirtualDPSourceGoneMidTransfer: #56828 with the decoder's default
// --sim-dead-session-loads fail. Liveness is per connection: nothing of
// rank 0's death reaches the session with rank 1, whose loads — the one
// in flight and one submitted a second later — end when that session's
// own heartbeat times out (mechanisms 4 and 23), 8–12 s after the fault;
// a dead session fails its loads (session.py @0577fc22).
func TestVirtualDPSourceGoneMidTransfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hbIvl, hbTO = 2 * time.Second, 10 * time.Second
		g := goneMidTransfer(t)
		// libzmq ends the connection at the first of two timers: the
		// decoder's own PING, sent at most one interval after the fault,
		// unanswered for hbTO (HEARTBEAT_TIMEOUT), or the TTL of rank 1's
		// last PING, received at most one interval before the fault
		// (HEARTBEAT_TTL, = hbTO): between hbTO-hbIvl and hbTO+hbIvl. Which
		// comes first is the two heartbeat clocks' phase at the fault.
		for _, i := range []int{1, 2} {
			if e := g.end(i); e < hbTO-hbIvl || e > hbTO+hbIvl+vMissCost {
				t.Errorf("%s ended %v after the fault, want on rank 1's own heartbeat, in [%v, %v]", goneLegs[i].id, e, hbTO-hbIvl, hbTO+hbIvl+vMissCost)
			}
		}
		if strings.Contains(g.decLog, "sending abort") {
			t.Errorf("decoder log: a load timed out, want every load failed with its session:\n%s", g.decLog)
		}
	})
}

// TestVirtualDPSourceGoneMidTransferLoadsTimeOut: #56828 with the
// decoder's --sim-dead-session-loads timeout, the build: rank 1's
// session still dies of its heartbeat, but its loads outlive it (mechanism
// 29), each to its load timeout after its submit, then its abort goes into
// the dead connection and is never acked, and the load fails after the
// abort-ack timeout: 40 s after its submit, the 36–43 s. Rank 0's,
// whose connection reset, still end at once.
func TestVirtualDPSourceGoneMidTransferLoadsTimeOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const loadTO, abortTO = 30 * time.Second, 10 * time.Second
		g := goneMidTransfer(t, "--sim-dead-session-loads", "timeout")
		for _, i := range []int{1, 2} {
			// On the fake clock: the two timers after its submit, plus a
			// miss's cost (the step that takes the leg up and the local
			// prefill after the failure: at most vMissCost).
			if l, lo := g.res[i].latency, loadTO+abortTO; l < lo || l > lo+vMissCost {
				t.Errorf("%s took %v, want load timeout + abort-ack after its submit + a miss's cost, in [%v, %v]", goneLegs[i].id, l, lo, lo+vMissCost)
			}
		}
		for _, want := range []string{
			"dead-session loads: timeout",
			"session 127.0.0.1:7778 died with 2 unacknowledged load(s)",
			"P2PSession 127.0.0.1:7778: gone-r1 timed out, sending abort (load timeout 30.0s)",
			"P2PSession 127.0.0.1:7778: abort_ack timed out for kv_request_id=gone-r1 after 10.0s",
			"P2PSession 127.0.0.1:7778: gone-r1-late timed out, sending abort (load timeout 30.0s)",
			"P2PSession 127.0.0.1:7778: abort_ack timed out for kv_request_id=gone-r1-late after 10.0s",
		} {
			if !strings.Contains(g.decLog, want) {
				t.Errorf("decoder log lacks %q:\n%s", want, g.decLog)
			}
		}
		if strings.Contains(g.decLog, "gone-r0 timed out") {
			t.Errorf("decoder log: rank 0's load timed out, want it failed at its connection's reset:\n%s", g.decLog)
		}
	})
}
