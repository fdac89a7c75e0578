package netfault

import (
	"net"
	"testing"
	"time"
)

// BenchmarkPartitionHeal measures one partition of two ports and its heal:
// two netlink transactions, the time a fault takes to act and to undo.
func BenchmarkPartitionHeal(b *testing.B) {
	if err := Check("this benchmark"); err != nil {
		b.Skipf("skipped: the kernel firewall cannot be changed here: %v", err)
	}
	f, err := New("bench-" + time.Now().Format("150405.000000"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	// Ports of listeners of this benchmark, so no one else's traffic is cut.
	var ports []int
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ln.Close() })
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	var act, undo time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := f.Partition("source-0", ports...); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := f.Heal("source-0"); err != nil {
			b.Fatal(err)
		}
		act += t1.Sub(t0)
		undo += time.Since(t1)
	}
	b.ReportMetric(float64(act.Microseconds())/float64(b.N), "µs/partition")
	b.ReportMetric(float64(undo.Microseconds())/float64(b.N), "µs/heal")
}
