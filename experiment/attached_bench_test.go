package experiment

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"p2pfault/event"
)

// attachedDecoder is an attached engine that is this process itself: an
// HTTP server answering /health on a loopback port, found in /proc as a
// local engine.
func attachedDecoder(b *testing.B) *attachedTarget {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	go srv.Serve(l)
	b.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	return &attachedTarget{role: event.RoleDecoder, name: "decoder", url: "http://127.0.0.1:" + strconv.Itoa(port), host: "127.0.0.1",
		httpPort: port, local: true}
}

// BenchmarkAttachedRefresh is one engine's share of a poll round: /health
// and the /proc check, with the listener cached (every round but the
// first and those after a restart) and cold (the fd scan of /proc).
func BenchmarkAttachedRefresh(b *testing.B) {
	t := attachedDecoder(b)
	ctx := context.Background()
	for _, cold := range []bool{false, true} {
		name := "cached"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			t.refresh(ctx, time.Second)
			if in := t.State(); in.Pid == 0 || in.State != event.StateReady {
				b.Fatalf("state %+v: want this process, ready", in)
			}
			for b.Loop() {
				if cold {
					t.forget()
				}
				t.refresh(ctx, time.Second)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/refresh")
		})
	}
}

// BenchmarkAttachedState is what every fault's Changed costs per engine:
// the cached state and one /proc/PID/stat read.
func BenchmarkAttachedState(b *testing.B) {
	t := attachedDecoder(b)
	t.refresh(context.Background(), time.Second)
	for b.Loop() {
		_ = t.State()
	}
}
