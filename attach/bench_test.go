package attach

import (
	"net"
	"testing"

	"github.com/prometheus/procfs"
)

// BenchmarkFindListener is the cost of finding a port's process through
// /proc (net/tcp{,6}, then every process's fds), paid once per local
// action and per Process call; procs/op is how many processes the host had.
func BenchmarkFindListener(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	procs, _ := allPids()
	b.ResetTimer()
	for b.Loop() {
		if _, err := FindListener("127.0.0.1", port); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(procs), "procs/op")
}

func allPids() (int, error) {
	ms, err := allProcs()
	return len(ms), err
}

func allProcs() ([]int, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, err
	}
	ps, err := fs.AllProcs()
	var out []int
	for _, p := range ps {
		out = append(out, p.PID)
	}
	return out, err
}
