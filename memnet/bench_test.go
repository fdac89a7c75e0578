package memnet

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIdleConnsDoNotSlowAPair is one round trip of a byte on a pair
// of connected hosts while idle connections wait on the same fabric, each
// end blocked in Read as an engine's reader goroutine is. A write wakes
// the reader it concerns only, so the cost per round trip must not grow
// with the number of idle connections (before wake-ups were scoped, every
// change woke every waiter of the fabric: cost grew with idle). wakes/op
// counts the waits that ended, the pair's included; cpu-ns/op is the
// process's CPU time (user+sys) per round trip, every goroutine's work
// included, which a loaded machine disturbs less than ns/op.
func BenchmarkIdleConnsDoNotSlowAPair(b *testing.B) {
	for _, idle := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("idle=%d", idle), func(b *testing.B) {
			f := New(1)
			cli, srv := f.Host("cli"), f.Host("srv")
			ln, err := srv.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { ln.Close() })
			dial := func() (net.Conn, net.Conn) {
				c, err := cli.DialContext(b.Context(), "tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				s, err := ln.Accept()
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.Close(); s.Close() })
				return c, s
			}
			for range idle {
				c, s := dial()
				for _, e := range []net.Conn{c, s} {
					go func() { _, _ = e.Read(make([]byte, 1)) }() // ends at Close
				}
			}
			c, s := dial()
			go func() { _, _ = io.Copy(s, s) }() // the echo: ends at Close
			buf := []byte{1}
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
				// Let whatever the round trip woke run before the next
				// one, as a synctest bubble does before its clock moves
				// (else the pair hands the CPU to each other and starves
				// the woken idle readers, hiding their cost).
				runtime.Gosched()
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
			f.mu.Lock()
			b.ReportMetric(float64(f.wakes)/float64(b.N), "wakes/op")
			f.mu.Unlock()
		})
	}
}

// cpuTime is the CPU time (user+sys) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
