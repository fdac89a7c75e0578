package runner

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"p2pfault/runner/session"
)

func TestRingKeepsLastLinesInOrder(t *testing.T) {
	tests := []struct {
		name  string
		size  int
		added int
		ask   int
		want  []string
	}{
		{"fewer than asked", 4, 2, 3, []string{"l0", "l1"}},
		{"wrapped", 3, 5, 3, []string{"l2", "l3", "l4"}},
		{"asked fewer than kept", 3, 5, 2, []string{"l3", "l4"}},
		{"empty", 3, 0, 3, nil},
		{"asked none", 3, 2, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRing(tt.size)
			for i := range tt.added {
				r.add("l" + strconv.Itoa(i))
			}
			if got := r.last(tt.ask); !slices.Equal(got, tt.want) {
				t.Errorf("last(%d) = %q, want %q", tt.ask, got, tt.want)
			}
		})
	}
}

func TestReadLinesSplitsAndBoundsLines(t *testing.T) {
	long := strings.Repeat("x", maxLine+100)
	var got []string
	readLines(strings.NewReader("a\nb\r\n"+long+"\nlast"), func(l string) { got = append(got, l) })
	if len(got) != 4 || got[0] != "a" || got[1] != "b" || len(got[2]) != maxLine || got[3] != "last" {
		t.Errorf("lines: %d, first %q %q, long %d, last %q", len(got), got[0], got[1], len(got[2]), got[len(got)-1])
	}
}

func TestResolvePortsMovesTakenDefaultsOnly(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l2.Addr().(*net.TCPAddr).Port
	l2.Close()

	cfg := Config{Sources: 1}
	got, err := resolvePorts(cfg, []portPlan{{http: taken, p2p: free}, {http: free + 1000, p2p: free + 1001}})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].http == taken || got[0].http == 0 {
		t.Errorf("taken default port %d kept: %+v", taken, got[0])
	}
	if got[0].p2p != free {
		t.Errorf("free default port %d moved to %d", free, got[0].p2p)
	}

	cfg.FreePorts = true
	got, err = resolvePorts(cfg, []portPlan{{http: 8100, p2p: 7777}, {http: 8200, p2p: 7778, fixedHTTP: true}})
	if err != nil && !strings.Contains(err.Error(), "8200") {
		t.Fatal(err)
	}
	if err == nil && (got[0].http == 8100 || got[0].p2p == 7777 || got[1].p2p == 7778 || got[1].http != 8200) {
		t.Errorf("FreePorts: %+v, want every unfixed port moved and the fixed one kept", got)
	}

	_, err = resolvePorts(Config{Sources: 1}, []portPlan{{http: taken, p2p: free, fixedHTTP: true}, {http: free + 1, p2p: free + 2}})
	if err == nil || !strings.Contains(err.Error(), "fixed source-0 HTTP port "+strconv.Itoa(taken)+" is in use by pid") {
		t.Errorf("fixed taken port: %v", err)
	}
}

// TestPortPoolNeverGivesAPortTwiceNorAnEphemeralOne: clusters started side
// by side share a pool; its ports are free, distinct, and below the
// kernel's ephemeral range (where outgoing connections would take them
// while an engine loads its model).
func TestPortPoolNeverGivesAPortTwiceNorAnEphemeralOne(t *testing.T) {
	pool := NewPortPool()
	seen := map[int]bool{}
	for range 200 {
		p, err := pool.pick(map[int]bool{})
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
		if p < pool.lo || p >= pool.hi {
			t.Fatalf("port %d outside [%d, %d)", p, pool.lo, pool.hi)
		}
	}
}

// TestStoppedRanksSaysWhichCoresAreStopped: from a session's members as
// /proc shows them (a front end 100, rank 0's core 101 with a worker 103,
// rank 1's core 102) and which are stopped, the ranks every process of
// which is stopped; a stopped process of no such rank (the front end, or a
// core whose worker runs) makes the engine stopped as a whole.
func TestStoppedRanksSaysWhichCoresAreStopped(t *testing.T) {
	cores := map[int]int{101: 0, 102: 1}
	members := func(stopped ...int) []session.Proc {
		ms := []session.Proc{{Pid: 100, PPid: 1}, {Pid: 101, PPid: 100}, {Pid: 102, PPid: 100}, {Pid: 103, PPid: 101}}
		for i := range ms {
			ms[i].State = 'S'
			if slices.Contains(stopped, ms[i].Pid) {
				ms[i].State = 'T'
			}
		}
		return ms
	}
	tests := []struct {
		name    string
		stopped []int
		ranks   []int
		whole   bool
	}{
		{"none", nil, nil, false},
		{"rank 1's core", []int{102}, []int{1}, false},
		{"rank 0's core and its worker", []int{101, 103}, []int{0}, false},
		{"both ranks, the front end running", []int{101, 102, 103}, []int{0, 1}, false},
		{"rank 0's core, its worker running", []int{101}, nil, true},
		{"the front end", []int{100}, nil, true},
		{"rank 1 and the front end", []int{100, 102}, nil, true},
	}
	for _, tt := range tests {
		ranks, whole := stoppedRanks(members(tt.stopped...), cores, 2)
		if !slices.Equal(ranks, tt.ranks) || whole != tt.whole {
			t.Errorf("%s: stoppedRanks = %v, whole %v; want %v, whole %v", tt.name, ranks, whole, tt.ranks, tt.whole)
		}
	}
}
