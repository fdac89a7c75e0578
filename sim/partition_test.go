package sim

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
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
	// The loaded phase and both arms' latencies are judged on in-process
	// engines (TestVirtualPartitionOfASource); what the kernel's firewall
	// does to real sockets is judged here: a short cut the session
	// survives, by the kernel's retransmission, and an idle one only the
	// heartbeat notices.
	for _, mode := range []string{"wait"} {
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
