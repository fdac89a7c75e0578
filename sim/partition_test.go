package sim

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"p2pfault/netfault"
)

// The simulated engine under a network partition of a source, with nothing
// in the sim that knows about partitions: the kernel drops the source's
// packets (netfault) and the engines react to what their sockets see.
// Time is compressed as in the stall tests (--sim-time-scale 0.1: lookup
// timeout 0.8 s, handshake 3 s, heartbeat every 0.2 s and dead after 1 s,
// a 3 s partition for the seed's 30 s); P2PFAULT_PARTITION_SCALE=1 runs it
// at real time (about two minutes). The kernel's own TCP timers (SYN
// retransmits 1, 3, 7, 15, 31 s after the first, RTO ≥ 0.2 s) are never
// scaled.
type partitionTimes struct {
	scale                   string
	lookup, handshake       time.Duration
	heartbeatIvl, heartbeat time.Duration
	partition, every        time.Duration
}

func partitionTiming(t *testing.T) partitionTimes {
	t.Helper()
	v := os.Getenv("P2PFAULT_PARTITION_SCALE")
	if v == "" {
		v = faultScale
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || f > 1 {
		t.Fatalf("P2PFAULT_PARTITION_SCALE=%q: want a number in (0, 1]", v)
	}
	sc := func(d time.Duration) time.Duration { return time.Duration(float64(d) * f) }
	return partitionTimes{scale: v, lookup: sc(8 * time.Second), handshake: sc(30 * time.Second),
		heartbeatIvl: sc(2 * time.Second), heartbeat: sc(10 * time.Second),
		partition: sc(30 * time.Second), every: sc(500 * time.Millisecond)}
}

// sourcePorts are the TCP ports a sim engine listens on: HTTP and P2P.
func sourcePorts(t *testing.T, e *engineProc) []int {
	t.Helper()
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	hp, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return []int{hp, e.p2pPort}
}

func newPartitioner(t *testing.T, tag string) *netfault.Firewall {
	t.Helper()
	if err := netfault.Check("partition"); err != nil {
		t.Skipf("skipped: a partition needs the kernel firewall: %v", err)
	}
	fw, err := netfault.New(fmt.Sprintf("simtest-%d-%s", os.Getpid(), tag))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fw.Close(); err != nil {
			t.Errorf("close firewall: %v", err)
		}
	})
	return fw
}

// waitDown returns when the decoder's log first says src is down (and the
// line), or after within.
func waitDown(dec, src *engineProc, from int, within time.Duration) (time.Duration, string) {
	start := time.Now()
	re := regexp.MustCompile(`.*peer ` + regexp.QuoteMeta(src.p2pID()) + ` down: .*`)
	for time.Since(start) < within {
		if l := re.FindString(dec.log.String()[from:]); l != "" {
			return time.Since(start), l
		}
		time.Sleep(5 * time.Millisecond)
	}
	return -1, ""
}

// peerLines are the decoder's log lines naming src, after offset from.
func peerLines(dec, src *engineProc, from int) []string {
	var out []string
	for _, l := range strings.Split(dec.log.String()[from:], "\n") {
		if strings.Contains(l, src.p2pID()) {
			out = append(out, l)
		}
	}
	return out
}

func TestPartitionOfASource(t *testing.T) {
	tm := partitionTiming(t)
	L, H := tm.lookup, tm.handshake
	const late = 1500 * time.Millisecond // room for a loaded 2-core machine
	for _, mode := range []string{"wait", "prefill"} {
		t.Run(mode, func(t *testing.T) {
			fw := newPartitioner(t, mode)
			opts := engineOpts{scale: tm.scale, args: []string{"--sim-freeze-gap", "1s"}}
			src0 := startEngine(t, "source-0", opts)
			src1 := startEngine(t, "source-1", opts)
			opts.mode = mode
			dec := startEngine(t, "decoder", opts)
			// A pull may wait a lookup and then a handshake timeout: the
			// client waits longer, so the engine's deadlines are measured.
			c := newClient(max(20*time.Second, L+H+late+10*time.Second))
			warm(t, c, dec, src0)
			warm(t, c, dec, src1)
			ports := sourcePorts(t, src0)

			// Short: a partition shorter than the heartbeat and lookup
			// timeouts. The session survives, and the lookup sent into the
			// cut connection is delivered after the heal by the kernel's
			// retransmission (RTO 0.2 s, doubling), so the pull still hits,
			// late: nothing sent into a connection that comes back is lost.
			// The lookup deadline counts from the source's last frame (up to
			// one heartbeat interval before the cut), and the kernel's
			// retransmissions back off (0.2 s, 0.6 s, 1.4 s, 3 s after the
			// send, never scaled): a quarter of (lookup - interval) gets the
			// retransmission that crosses the heal in before that deadline.
			short := min(tm.heartbeat*3/10, (L-tm.heartbeatIvl)/4)
			p := words(fmt.Sprintf("short-%d", time.Now().UnixNano()), 400)
			seed(t, c, src0, p)
			from := len(dec.log.String())
			if err := fw.Partition("source-0", ports...); err != nil {
				t.Fatal(err)
			}
			shortHealed := make(chan struct{})
			healShort := time.AfterFunc(short, func() {
				defer close(shortHealed)
				if err := fw.Heal("source-0"); err != nil {
					t.Errorf("heal: %v", err)
				}
			})
			t.Cleanup(func() { healShort.Stop() })
			r := pull(c, dec, src0, p)
			t.Logf("a pull sent at the start of a %v partition: status %d, cached %d, %.2fs", short, r.status, r.cached, r.latency.Seconds())
			if r.status != http.StatusOK || r.cached == 0 {
				t.Errorf("pull across a %v partition: status %d cached %d err %v, want a hit delivered after the heal", short, r.status, r.cached, r.err)
			}
			if r.latency < short-50*time.Millisecond {
				t.Errorf("pull across a %v partition took %v: it cannot have crossed the cut", short, r.latency)
			}
			if l := peerLines(dec, src0, from); len(l) > 0 {
				t.Errorf("a partition shorter than the timeouts was noticed:\n%s", strings.Join(l, "\n"))
			}
			<-shortHealed

			// Idle: a ready session and no pull in flight. Only the
			// heartbeat can notice, and it must: no reset comes.
			from = len(dec.log.String())
			if err := fw.Partition("source-0", ports...); err != nil {
				t.Fatal(err)
			}
			detect, line := waitDown(dec, src0, from, tm.heartbeat+tm.heartbeatIvl+late)
			if detect < 0 {
				t.Fatalf("no `peer %s down` in the decoder's log within %v of an idle partition:\n%s", src0.p2pID(), tm.heartbeat+tm.heartbeatIvl+late, strings.Join(peerLines(dec, src0, from), "\n"))
			}
			t.Logf("idle partition: the decoder logged %q %v after it began", line, detect.Round(time.Millisecond))
			if !strings.Contains(line, "heartbeat timed out") {
				t.Errorf("idle partition detected by %q, want the heartbeat timeout", line)
			}
			if detect < tm.heartbeat-100*time.Millisecond {
				t.Errorf("idle partition detected after %v, before the heartbeat timeout %v could fire", detect, tm.heartbeat)
			}
			if err := fw.Heal("source-0"); err != nil {
				t.Fatal(err)
			}
			healed := time.Now()
			rewarm(t, c, dec, src0)
			t.Logf("after the idle partition's heal, a pull naming source-0 hit again %v later", time.Since(healed).Round(time.Millisecond))

			// Loaded: pulls naming each source every 50 ms, source-0's
			// prompts seeded before (its HTTP port is cut too).
			horizon := L + H + 2*time.Second + tm.partition
			samples, from, healAt := partitionRun(t, fw, c, dec, src0, src1, ports, tm, horizon)
			var during, after []sample
			var healthy []time.Duration
			for _, s := range samples {
				if s.r.err != nil || s.r.status != http.StatusOK {
					t.Errorf("%v: want 200 (body %s)", s, s.r.body)
					continue
				}
				if s.source == 1 {
					healthy = append(healthy, s.r.serviceTime)
					// The decoder's own time: this loaded client may add
					// seconds of its own.
					if s.r.cached == 0 || s.r.serviceTime >= H {
						t.Errorf("%v: the other source must keep hitting, each pull well under %v in the decoder", s, H)
					}
					continue
				}
				if s.end < healAt && s.r.cached != 0 {
					t.Errorf("%v: a pull from a partitioned source hit before the heal at %v", s, healAt)
				}
				if s.start < healAt {
					during = append(during, s)
				} else {
					after = append(after, s)
				}
			}
			lat := func(ss []sample) []time.Duration {
				var d []time.Duration
				for _, s := range ss {
					d = append(d, s.end-s.start)
				}
				sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
				return d
			}
			dl := lat(during)
			if len(dl) == 0 {
				t.Fatal("no pull naming source-0 during the partition")
			}
			hits := 0
			for _, s := range during {
				if s.r.cached > 0 {
					hits++
				}
			}
			t.Logf("%d pulls naming source-0 started during the %v partition: p50 %.2fs, max %.2fs, %d hit (after the heal)",
				len(dl), tm.partition, dl[len(dl)/2].Seconds(), dl[len(dl)-1].Seconds(), hits)
			sort.Slice(healthy, func(i, j int) bool { return healthy[i] < healthy[j] })
			if len(healthy) > 0 {
				t.Logf("%d pulls naming source-1 meanwhile: all hit, service time p50 %.3fs", len(healthy), healthy[len(healthy)/2].Seconds())
			}
			// No pull waits past the deadlines that apply: at most a lookup
			// timeout on the ready session, then a handshake timeout on
			// the next, whose connect hangs. In the decoder: this loaded
			// client adds its own.
			var maxSvc time.Duration
			for _, s := range during {
				maxSvc = max(maxSvc, s.r.serviceTime)
			}
			if maxSvc > L+H+late {
				t.Errorf("slowest pull naming source-0 during the partition took %v in the decoder, want at most %v (lookup + handshake timeout)", maxSvc, L+H+late)
			}
			if mode == "prefill" {
				// Judged on the decoder's time (this loaded client adds its
				// own); a pull that hit was admitted once the next session
				// was ready (a starved core may admit it that late) and so
				// met no pending handshake.
				var svc []time.Duration
				for _, s := range during {
					if !s.within(L+300*time.Millisecond, healAt) {
						continue
					}
					svc = append(svc, s.r.serviceTime)
					if s.r.cached == 0 && s.r.serviceTime > H/3 {
						t.Errorf("%v: with the handshake pending, prefill mode must prefill at once", s)
					}
				}
				// A mode that waited for the handshake would move the median.
				if p50 := median(svc); p50 > H/3 {
					t.Errorf("median of %d pulls meeting the pending handshake took %v in the decoder, want a local prefill well under %v", len(svc), p50, H/3)
				}
			}
			firstHit := time.Duration(-1)
			for _, s := range after {
				if s.r.cached > 0 && (firstHit < 0 || s.start < firstHit) {
					firstHit = s.start
				}
			}
			if firstHit < 0 {
				t.Errorf("no pull naming source-0 hit after the heal at %v", healAt)
			} else {
				t.Logf("first pull naming source-0 to hit after the heal started %.2fs after it", (firstHit - healAt).Seconds())
				if firstHit-healAt > H+late {
					t.Errorf("first hit after the heal started %v after it, want within a handshake timeout %v (+%v)", firstHit-healAt, H, late)
				}
			}
			for _, s := range after {
				if s.start > healAt+H+late && s.r.cached == 0 {
					t.Errorf("%v: still missing long after the heal", s)
				}
			}
			lines := peerLines(dec, src0, from)
			t.Logf("decoder's log naming source-0 during the loaded run:\n%s", strings.Join(lines, "\n"))
			for _, l := range lines {
				if strings.Contains(l, "reset") || strings.Contains(l, "refused") {
					t.Errorf("the decoder saw a reset or refusal from a partitioned source: %s", l)
				}
			}
		})
	}
}

// rewarm pulls fresh prompts from src until one hits through P2P: warm's
// prompts would hit the decoder's own prefix cache a second time.
func rewarm(t *testing.T, c *http.Client, dec, src *engineProc) {
	t.Helper()
	for i := 0; i < 200; i++ {
		p := words(fmt.Sprintf("rewarm-%d-%s-%d", time.Now().UnixNano(), src.name, i), 400)
		seed(t, c, src, p)
		if r := pull(c, dec, src, p); r.status == http.StatusOK && r.cached > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no pull from %s into %s hit after the heal", src.name, dec.name)
}

// partitionRun partitions src0's ports for tm.partition while pulls naming
// each source start every tm.every until horizon; times are since the
// partition began. It returns the samples, the decoder's log offset at the
// start and when the heal came.
func partitionRun(t *testing.T, fw *netfault.Firewall, c *http.Client, dec, src0, src1 *engineProc, ports []int, tm partitionTimes, horizon time.Duration) ([]sample, int, time.Duration) {
	t.Helper()
	n := int(horizon / tm.every)
	prompts := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range prompts {
		prompts[i] = words(fmt.Sprintf("part-s0-%d", i), 400)
		wg.Add(1)
		sem <- struct{}{}
		go func(p string) {
			defer wg.Done()
			defer func() { <-sem }()
			seed(t, c, src0, p)
		}(prompts[i])
	}
	wg.Wait()

	from := len(dec.log.String())
	var mu sync.Mutex
	var samples []sample
	if err := fw.Partition("source-0", ports...); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	healed := make(chan time.Duration, 1)
	heal := time.AfterFunc(tm.partition, func() {
		at := time.Since(t0) // the heal begins: nothing ended before it got through
		err := fw.Heal("source-0")
		healed <- at
		if err != nil {
			t.Errorf("heal: %v", err)
		}
	})
	t.Cleanup(func() { heal.Stop() })
	for i := 0; i < n; i++ {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * tm.every)))
		wg.Add(2)
		go func(i int) {
			defer wg.Done()
			start := time.Since(t0)
			r := pull(c, dec, src0, prompts[i])
			mu.Lock()
			samples = append(samples, sample{source: 0, start: start, end: start + r.latency, r: r})
			mu.Unlock()
		}(i)
		go func(i int) {
			defer wg.Done()
			p := words(fmt.Sprintf("part-s1-%d", i), 400)
			seed(t, c, src1, p)
			start := time.Since(t0)
			r := pull(c, dec, src1, p)
			mu.Lock()
			samples = append(samples, sample{source: 1, start: start, end: start + r.latency, r: r})
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	sort.Slice(samples, func(i, j int) bool { return samples[i].start < samples[j].start })
	return samples, from, <-healed
}
