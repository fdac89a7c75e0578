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
