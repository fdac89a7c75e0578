package probe_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/probe"
)

// The content check end to end: sim engines (processes) whose text is a
// function of the KV they decode from, the probe comparing each pull's
// text with its seed's, check content_matches judging the samples.

// warmProbe handshakes the decoder's session with each source.
func warmProbe(t *testing.T, decoder simEngine, sources []probe.Source) {
	t.Helper()
	p, err := probe.New(probe.Config{DecoderURL: decoder.url, Sources: sources, Model: "m", ContentTokens: 8,
		Interval: 50 * time.Millisecond, SeedTimeout: 5 * time.Second, PullTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer p.Close()
	if err := p.Warmup(context.Background(), 20*time.Second); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
}

// TestAP2PHitAndALocalPrefillGiveTheSourcesText: pulls naming a live source
// load its blocks over P2P; pulls naming a P2P address nothing listens on
// (the seed still goes to the source) prefill locally. Both answer the text
// the source gave its seed, and content_matches passes counting them all.
func TestAP2PHitAndALocalPrefillGiveTheSourcesText(t *testing.T) {
	decoder, sources := simCluster(t, 1)
	warmProbe(t, decoder, sources)
	nobody := sources[0]
	nobody.Index, nobody.P2PPort = 1, freePort(t)
	p, err := probe.New(probe.Config{DecoderURL: decoder.url, Sources: []probe.Source{sources[0], nobody}, Model: "m", ContentTokens: 8,
		Interval: 50 * time.Millisecond, SeedTimeout: 5 * time.Second, PullTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r := startRun(t, p)
	time.Sleep(800 * time.Millisecond)
	got := r.stop(20 * time.Second)
	var samples []event.Sample
	hits, local := 0, 0
	for _, s := range got {
		samples = append(samples, s.Sample)
		if s.Status != 200 || s.SeedStatus != 200 {
			t.Errorf("trial %d (source %d): seed %d, pull %d %q", s.Trial, s.Source, s.SeedStatus, s.Status, s.Err)
			continue
		}
		switch s.Source {
		case 0:
			if s.CachedTokens != 384 {
				t.Errorf("trial %d: cached %d, want a 384-token P2P hit", s.Trial, s.CachedTokens)
			}
			hits++
		case 1:
			if s.CachedTokens != 0 {
				t.Errorf("trial %d: cached %d from an address nothing listens on", s.Trial, s.CachedTokens)
			}
			local++
		}
		if s.Content != event.ContentSame {
			t.Errorf("trial %d (source %d, cached %d): content %q, pull %q, source %q", s.Trial, s.Source, s.CachedTokens, s.Content, s.PullText, s.SourceText)
		}
	}
	if hits < 4 || local < 4 {
		t.Fatalf("%d hits and %d local prefills in 0.8 s at 2 × 20 trials/s", hits, local)
	}
	res := check.ContentMatches(samples, check.ContentRule{On: true})
	want := fmt.Sprintf("all %d pulls that returned 200 gave the source's own completion", hits+local)
	if !res.Passed || res.Detail != want {
		t.Errorf("content_matches: %+v, want a pass: %q", res, want)
	}
	t.Logf("%d P2P hits and %d local prefills; %s: %s", hits, local, res.Name, res.Detail)
}

// TestABlockSwappedUnderTheDecoderFailsContentMatches: with the source's
// reuse-freed-blocks defect (vllm#21570), the slots of a hit whose store
// timed out are reused by other prompts while the decoder still has to
// fetch them, so the pull loads other prompts' blocks: it answers 200, a
// full hit, and the wrong text, which content_matches names. The decoder
// is made the slow side by hand: the lookup waits at a stopped source,
// the decoder is stopped, the source answers (and pins the hit), its 2 s
// store timeout passes, other prompts are stored, the decoder goes on and
// fetches (before the lapsed pin's record is dropped, one more store
// timeout later). Each step waits for what the kernel shows of the last
// (the lookup, then the answer, queued unread on the stopped side's
// socket), so a slow machine only stretches the steps; heartbeats are
// slowed down so that nothing else is sent. Without the defect the same
// steps give the right text.
func TestABlockSwappedUnderTheDecoderFailsContentMatches(t *testing.T) {
	for _, defect := range []bool{false, true} {
		t.Run(fmt.Sprint("defect ", defect), func(t *testing.T) {
			quiet := []string{"--sim-freeze-gap", "1m", "--sim-heartbeat-interval", "1m", "--sim-heartbeat-timeout", "5m"}
			args := append([]string{"--sim-store-timeout", "2s"}, quiet...)
			if defect {
				args = append(args, "--sim-defect", "reuse-freed-blocks")
			}
			src := startSim(t, "source", args...)
			dec := startSim(t, "decoder", quiet...)
			sources := []probe.Source{{Index: 0, URL: src.url, P2PHost: src.p2pHost, P2PPort: src.p2pPort}}
			warmProbe(t, dec, sources)

			stopped := make(chan struct{})
			p, err := probe.New(probe.Config{DecoderURL: dec.url, Sources: sources, Model: "m", ContentTokens: 8,
				Interval: time.Hour, SeedTimeout: 5 * time.Second, PullTimeout: 30 * time.Second,
				// Before the pull leaves, its source stops: the lookup waits.
				Started: func(event.PullStart) { stopSession(t, src.sid); close(stopped) }})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			r := startRun(t, p)
			<-stopped
			waitUnread(t, "the decoder's lookup at the stopped source", src.sid)
			stopSession(t, dec.sid)
			contSession(t, src.sid)
			waitUnread(t, "the source's answer at the stopped decoder", dec.sid) // the hit is pinned
			time.Sleep(2400 * time.Millisecond)                                  // the pin's 2 s store timeout passes
			for i := range 3 {
				postPrompt(t, src.url, fmt.Sprint("other-", i))
			}
			contSession(t, dec.sid)
			select {
			case <-r.first:
			case <-time.After(30 * time.Second):
				t.Fatal("the pull did not end")
			}
			got := r.stop(10 * time.Second)
			s := got[0].Sample
			if s.Status != 200 || s.CachedTokens != 384 {
				t.Fatalf("the pull: status %d cached %d err %q, want a 384-token hit", s.Status, s.CachedTokens, s.Err)
			}
			res := check.ContentMatches([]event.Sample{s}, check.ContentRule{On: true})
			t.Logf("%s: %s", res.Name, res.Detail)
			if !defect {
				if s.Content != event.ContentSame || !res.Passed {
					t.Errorf("without the defect: content %q (pull %q, source %q), check %+v", s.Content, s.PullText, s.SourceText, res)
				}
				return
			}
			want := "1 pull naming source-0 returned other text than the source's completion (first at "
			if s.Content != event.ContentDiffers || res.Passed || !strings.HasPrefix(res.Detail, want) {
				t.Errorf("with the defect: content %q, check %+v, want a failure starting %q", s.Content, res, want)
			}
			if !strings.Contains(src.log.String(), "defect reuse-freed-blocks: fetch") {
				t.Errorf("the source did not log the defect firing:\n%s", src.log)
			}
		})
	}
}

// postPrompt completes a fresh 400-token prompt on url: its blocks are
// stored in the engine's CPU tier.
func postPrompt(t *testing.T, url, tag string) {
	t.Helper()
	var ids []string
	rng := rand.New(rand.NewPCG(uint64(len(tag)), 7))
	for range 400 {
		ids = append(ids, strconv.Itoa(probe.MinTokenID+rng.IntN(probe.MaxTokenID-probe.MinTokenID)))
	}
	body := `{"model":"m","prompt":[` + strings.Join(ids, ",") + `],"max_tokens":1,"temperature":0}`
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatalf("complete %s on %s: %v", tag, url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("complete %s on %s: %d", tag, url, resp.StatusCode)
	}
}

// stopSession SIGSTOPs every process of session sid and waits until each
// is stopped; contSession resumes them. A test that fails in between leaves
// them to startSim's cleanup, whose SIGKILL ends stopped processes too.
func stopSession(t *testing.T, sid int) { t.Helper(); signalSession(t, sid, syscall.SIGSTOP, true) }
func contSession(t *testing.T, sid int) { t.Helper(); signalSession(t, sid, syscall.SIGCONT, false) }

func signalSession(t *testing.T, sid int, sig syscall.Signal, stopped bool) {
	t.Helper()
	if err := syscall.Kill(-sid, sig); err != nil {
		t.Fatalf("signal session %d: %v", sid, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		all := true
		for _, pid := range sessionMembers(sid) {
			if procState(pid) == "T" != stopped {
				all = false
			}
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d: not all members stopped=%v after %v", sid, stopped, sig)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procState is the state letter of /proc/PID/stat ("" once gone).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// waitUnread waits until a TCP socket of session sid's processes holds
// bytes they have not read (stopped, they read nothing): /proc/net/tcp's
// rx_queue of a socket whose inode one of their fds names.
func waitUnread(t *testing.T, what string, sid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		inodes := map[string]bool{}
		for _, pid := range sessionMembers(sid) {
			fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
			for _, fd := range fds {
				if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "socket:[") {
					inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
				}
			}
		}
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			b, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(b), "\n")[1:] {
				fs := strings.Fields(line)
				if len(fs) < 10 || !inodes[fs[9]] {
					continue
				}
				_, rx, _ := strings.Cut(fs[4], ":")
				if n, _ := strconv.ParseInt(rx, 16, 64); n > 0 {
					return
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: nothing unread on the sockets of session %d within 10s", what, sid)
}

// freePort is a loopback port nothing listens on (a P2P address that
// refuses every connect).
func freePort(t *testing.T) int {
	t.Helper()
	u := closedURL(t)
	port, err := strconv.Atoi(u[strings.LastIndexByte(u, ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	return port
}
