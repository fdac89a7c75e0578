package netfault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"p2pfault/verify"

	"golang.org/x/sys/unix"
)

// needRights skips a test that needs CAP_NET_ADMIN and nftables when this
// process lacks them (CI runs as root, so there it runs).
func needRights(t *testing.T) {
	t.Helper()
	if err := Check("this test"); err != nil {
		t.Skipf("skipped: the kernel firewall cannot be changed here: %v", err)
	}
}

var unsafeRe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// runID is unique per test and per test process, so parallel packages and
// other users of the host never share a table with this test.
func runID(t *testing.T, suffix string) string {
	return fmt.Sprintf("test-%d-%s%s", os.Getpid(), unsafeRe.ReplaceAllString(t.Name(), "_"), suffix)
}

func newFirewall(t *testing.T, suffix string) *Firewall {
	t.Helper()
	needRights(t)
	f, err := New(runID(t, suffix))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f
}

// listener accepts on network's loopback address (port 0) and echoes what
// each connection sends; it is closed at the end of the test.
func listener(t *testing.T, network, addr string) (string, int) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = io.Copy(c, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port
}

// connect dials addr and reports whether the handshake completed within d.
func connect(t *testing.T, addr string, d time.Duration) error {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, d)
	if err == nil {
		c.Close()
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func mustHang(t *testing.T, addr string) {
	t.Helper()
	start := time.Now()
	err := connect(t, addr, 2*time.Second)
	if err == nil {
		t.Fatalf("connect to %s completed in %v during the partition", addr, time.Since(start))
	}
	if !isTimeout(err) {
		t.Fatalf("connect to %s failed with %v after %v, want a timeout (no reset)", addr, err, time.Since(start))
	}
}

func mustComplete(t *testing.T, addr string) {
	t.Helper()
	if err := connect(t, addr, 2*time.Second); err != nil {
		t.Fatalf("connect to %s: %v, want it to complete within 2s", addr, err)
	}
}

func TestPartitionDropsTheTargetsPortsOnly(t *testing.T) {
	f := newFirewall(t, "")
	target, tport := listener(t, "tcp4", "127.0.0.1:0")
	bystander, _ := listener(t, "tcp4", "127.0.0.1:0")
	mustComplete(t, target)
	mustComplete(t, bystander)

	ports := []int{tport}
	var target6 string
	if addr, err := net.ResolveTCPAddr("tcp6", "[::1]:0"); err == nil {
		if ln, err := net.ListenTCP("tcp6", addr); err == nil {
			ln.Close() // loopback IPv6 works here: check the inet table catches it
			var p6 int
			target6, p6 = listener(t, "tcp6", "[::1]:0")
			ports = append(ports, p6)
		}
	}
	if err := f.Partition("source-0", ports...); err != nil {
		t.Fatalf("Partition: %v", err)
	}
	slices.Sort(ports) // Faults reports a fault's ports sorted
	mustHang(t, target)
	mustComplete(t, bystander)
	if target6 != "" {
		mustHang(t, target6)
	} else {
		t.Log("no IPv6 loopback here: the IPv6 half of the partition is not exercised")
	}
	if err := (verify.Verifier{}).Partitioned(context.Background(), target, time.Second); err != nil {
		t.Errorf("verify.Partitioned(target): %v", err)
	}
	if err := (verify.Verifier{}).Partitioned(context.Background(), bystander, time.Second); !errors.Is(err, verify.ErrNotPartitioned) {
		t.Errorf("verify.Partitioned(bystander) = %v, want ErrNotPartitioned", err)
	}
	if n, err := f.Dropped("source-0"); err != nil || n == 0 {
		t.Errorf("Dropped = %d, %v; want the dropped SYNs counted", n, err)
	}
	// Faults lists the ports sorted; the IPv6 listener's port may be the lower.
	sorted := slices.Sorted(slices.Values(ports))
	if got := f.Faults(); len(got) != 1 || got[0].Target != "source-0" || got[0].Kind != KindPartition || !slices.Equal(got[0].Ports, sorted) {
		t.Errorf("Faults = %+v", got)
	}

	if err := f.Heal("source-0"); err != nil {
		t.Fatalf("Heal: %v", err)
	}
	mustComplete(t, target)
	mustComplete(t, bystander)
	if target6 != "" {
		mustComplete(t, target6)
	}
	if err := (verify.Verifier{}).Partitioned(context.Background(), target, time.Second); !errors.Is(err, verify.ErrNotPartitioned) {
		t.Errorf("VerifyPartition after heal = %v, want ErrNotPartitioned", err)
	}
	if err := f.Heal("source-0"); !errors.Is(err, ErrNoFault) {
		t.Errorf("second Heal = %v, want ErrNoFault", err)
	}
	if got := f.Faults(); len(got) != 0 {
		t.Errorf("Faults after heal = %+v", got)
	}
}

// An established connection goes silent, with no reset either way, and
// what was sent into it is delivered after the heal (TCP retransmits it).
func TestPartitionSilencesAnEstablishedConnection(t *testing.T) {
	f := newFirewall(t, "")
	addr, port := listener(t, "tcp4", "127.0.0.1:0")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	echo := func(msg string, within time.Duration) error {
		if _, err := c.Write([]byte(msg)); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		return readExactly(c, buf, msg, within)
	}
	if err := echo("before", 2*time.Second); err != nil {
		t.Fatalf("echo before the partition: %v", err)
	}
	if err := f.Partition("source-0", port); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("during")); err != nil {
		t.Fatalf("write during the partition: %v (want it queued, as on a dead link)", err)
	}
	err = readExactly(c, buf, "during", 1500*time.Millisecond)
	if !isTimeout(err) {
		t.Fatalf("read during the partition: %v, want silence (a timeout), not data, EOF or a reset", err)
	}
	healed := time.Now()
	if err := f.Heal("source-0"); err != nil {
		t.Fatal(err)
	}
	// The kernel retransmits the queued bytes on its backoff (the first
	// retransmissions at 0.2, 0.6, 1.4, 3 s after the write on loopback),
	// so they arrive within a few seconds of the heal.
	if err := readExactly(c, buf, "during", 10*time.Second); err != nil {
		t.Fatalf("after heal, the bytes written during the partition: %v", err)
	}
	t.Logf("bytes written during the 1.5 s partition arrived %v after the heal", time.Since(healed).Round(time.Millisecond))
	if err := echo("after", 2*time.Second); err != nil {
		t.Fatalf("echo after the heal: %v", err)
	}
}

func readExactly(c net.Conn, buf []byte, want string, within time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(within))
	defer c.SetReadDeadline(time.Time{})
	n, err := io.ReadFull(c, buf[:len(want)])
	if err != nil {
		return err
	}
	if string(buf[:n]) != want {
		return fmt.Errorf("read %q, want %q", buf[:n], want)
	}
	return nil
}

// Loss drops each packet with the given chance, once: a connect within
// 500 ms needs its SYN (input) and SYN-ACK (output) through, so under 30%
// loss about 0.7² = 49% complete (a packet judged in both hooks would give
// 0.7⁴ = 24%, a partition 0%), and every connect to the bystander does.
func TestLossDropsThatShare(t *testing.T) {
	f := newFirewall(t, "")
	target, port := listener(t, "tcp4", "127.0.0.1:0")
	bystander, _ := listener(t, "tcp4", "127.0.0.1:0")
	if err := f.Loss("source-0", 30, port); err != nil {
		t.Fatal(err)
	}
	const n = 300
	ok := func(addr string) int {
		var wg sync.WaitGroup
		var mu sync.Mutex
		done := 0
		sem := make(chan struct{}, 30)
		for i := 0; i < n; i++ {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if connect(t, addr, 500*time.Millisecond) == nil {
					mu.Lock()
					done++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return done
	}
	got := ok(target)
	share := float64(got) / n
	t.Logf("under loss 30%%: %d of %d connects completed within 500 ms (%.2f; expected 0.49)", got, n, share)
	// σ = √(0.49·0.51/300) ≈ 0.029: the window is more than ±6σ wide.
	if share < 0.30 || share > 0.68 {
		t.Errorf("%.2f of connects completed under loss 30%%, want about 0.49 (0.30 to 0.68)", share)
	}
	if b := ok(bystander); b != n {
		t.Errorf("%d of %d connects to the bystander completed, want all", b, n)
	}
	if d, err := f.Dropped("source-0"); err != nil || d == 0 {
		t.Errorf("Dropped = %d, %v", d, err)
	} else {
		t.Logf("the rules counted %d dropped packets", d)
	}
}

func TestANewFaultReplacesTheOld(t *testing.T) {
	f := newFirewall(t, "")
	target, port := listener(t, "tcp4", "127.0.0.1:0")
	if err := f.Partition("source-0", port); err != nil {
		t.Fatal(err)
	}
	mustHang(t, target)
	if err := f.Loss("source-0", 1, port); err != nil {
		t.Fatalf("Loss over a partition: %v", err)
	}
	if got := f.Faults(); len(got) != 1 || got[0].Kind != KindLoss || got[0].Percent != 1 {
		t.Fatalf("Faults = %+v, want one loss 1%%", got)
	}
	// At 1% almost every connect completes: allow a few to be unlucky.
	completed := 0
	for i := 0; i < 10; i++ {
		if connect(t, target, 2*time.Second) == nil {
			completed++
		}
	}
	if completed < 8 {
		t.Errorf("%d of 10 connects completed under loss 1%% (replacing the partition)", completed)
	}
	if err := f.Heal("source-0"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, target)
}

func TestCloseDeletesTheTable(t *testing.T) {
	needRights(t)
	f, err := New(runID(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	target, port := listener(t, "tcp4", "127.0.0.1:0")
	if err := f.Partition("source-0", port); err != nil {
		t.Fatal(err)
	}
	names, err := Tables()
	if err != nil || !slices.Contains(names, f.Table()) {
		t.Fatalf("Tables() = %v, %v; want it to list %s", names, err, f.Table())
	}
	if _, err := New(runID(t, "")); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second New with the same run id: %v, want an error saying the table exists", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	names, err = Tables()
	if err != nil || slices.Contains(names, f.Table()) {
		t.Fatalf("Tables() after Close = %v, %v; want %s gone", names, err, f.Table())
	}
	mustComplete(t, target)
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := f.Partition("source-0", port); err == nil {
		t.Error("Partition after Close succeeded")
	}
}

// Two runs (two tables) may fault targets of the same name; neither's heal
// or close touches the other's rules.
func TestTwoRunsDoNotTouchEachOther(t *testing.T) {
	f1 := newFirewall(t, "-a")
	f2 := newFirewall(t, "-b")
	a, pa := listener(t, "tcp4", "127.0.0.1:0")
	b, pb := listener(t, "tcp4", "127.0.0.1:0")
	if err := f1.Partition("source-0", pa); err != nil {
		t.Fatal(err)
	}
	if err := f2.Partition("source-0", pb); err != nil {
		t.Fatal(err)
	}
	mustHang(t, a)
	mustHang(t, b)
	if err := f2.Heal("source-0"); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, b)
	mustHang(t, a)
	if err := f2.Partition("source-0", pb); err != nil {
		t.Fatal(err)
	}
	if err := f2.Close(); err != nil {
		t.Fatal(err)
	}
	mustComplete(t, b)
	mustHang(t, a)
	names, err := Tables()
	if err != nil || !slices.Contains(names, f1.Table()) || slices.Contains(names, f2.Table()) {
		t.Errorf("Tables() = %v, %v; want %s and not %s", names, err, f1.Table(), f2.Table())
	}
}

func TestBadInputIsNamed(t *testing.T) {
	f := &Firewall{faults: map[string]Fault{}} // validation comes before the kernel
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"empty target", f.Partition("", 80), `partition target ""`},
		{"target with a space", f.Partition("source 0", 80), `partition target "source 0"`},
		{"no ports", f.Partition("source-0"), "partition source-0: no ports given"},
		{"port 0", f.Partition("source-0", 0), "port 0 is not a TCP port"},
		{"port 70000", f.Loss("source-0", 5, 70000), "port 70000 is not a TCP port"},
		{"loss 0", f.Loss("source-0", 0, 80), "loss of 0% on source-0: want a share from 1% to 100%"},
		{"loss 101", f.Loss("source-0", 101, 80), "loss of 101%"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.name, tc.err, tc.want)
		}
	}
	if _, err := New("run/1"); err == nil || !strings.Contains(err.Error(), `run id "run/1"`) {
		t.Errorf("New(run/1) = %v", err)
	}
	for _, name := range []string{"filter", "p2pfault_", "p2pfault_x y", "nat"} {
		if _, err := DeleteTable(name); err == nil || !strings.Contains(err.Error(), "is not p2pfault's") {
			t.Errorf("DeleteTable(%q) = %v, want a refusal", name, err)
		}
	}
}

func TestKernelErrorsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
		se   bool
	}{
		{unix.EPERM, "partition needs CAP_NET_ADMIN: run as root or grant it with setcap cap_net_admin+ep ", true},
		{unix.EPROTONOSUPPORT, "partition needs nftables (family inet) in the kernel: load it with `modprobe nf_tables` or use a kernel built with CONFIG_NF_TABLES and CONFIG_NF_TABLES_INET", true},
		{unix.EOPNOTSUPP, "partition needs nftables (family inet) in the kernel", true},
		{unix.EBUSY, "partition: netlink receive: device or resource busy", false},
	} {
		err := classify("partition", fmt.Errorf("netlink receive: %w", tc.err))
		var se *SetupError
		if !strings.HasPrefix(err.Error(), tc.want) || errors.As(err, &se) != tc.se || !errors.Is(err, tc.err) {
			t.Errorf("classify(%v) = %v (setup error %v), want it to start with %q (setup error %v) and wrap the errno", tc.err, err, errors.As(err, &se), tc.want, tc.se)
		}
	}
}
