package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledP2pfaultLeavesNoEngine: SIGKILL p2pfault in the middle of a
// run; within 2 s no engine process of that run is alive (they run with a
// parent-death signal, in sessions of their own).
func TestKilledP2pfaultLeavesNoEngine(t *testing.T) {
	out := t.TempDir()
	cmd, log := startP2pfault(t, "run", "--headless", "--case", "none", "--duration", "60s",
		"--free-ports", "--engine-arg=--sim-startup-delay=0s", "--out", out)
	pids := waitEngines(t, out, 3, 60*time.Second, log)
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for {
		alive := alivePids(pids)
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, p := range alive {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("2 s after SIGKILL of p2pfault, engine processes %v are still alive", alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitEngines waits until the run's sessions.json names n engines and the
// run is past warm-up, and returns every pid in their sessions.
func waitEngines(t *testing.T, out string, n int, limit time.Duration, log interface{ String() string }) []int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		events, _ := os.ReadFile(filepath.Join(out, "events.jsonl"))
		if strings.Contains(string(events), `"phase":"baseline"`) {
			pids := sessionPids(t, out)
			if len(pids) >= n {
				return pids
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the run did not reach its baseline with %d engines in %v\n%s", n, limit, log.String())
	return nil
}

// sessionPids lists every live process whose session is one that the
// run's sessions.json names.
func sessionPids(t *testing.T, out string) []int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(out, "sessions.json"))
	if err != nil {
		return nil
	}
	var f struct {
		Engines []struct {
			Sid int `json:"sid"`
		} `json:"engines"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil
	}
	sids := map[int]bool{}
	for _, e := range f.Engines {
		if e.Sid > 1 {
			sids[e.Sid] = true
		}
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sid, state, ok := procSession(pid)
		if ok && sids[sid] && state != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

func procSession(pid int) (sid int, state string, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", false
	}
	s := string(data)
	r := strings.LastIndexByte(s, ')')
	if r < 0 {
		return 0, "", false
	}
	f := strings.Fields(s[r+1:])
	if len(f) < 4 {
		return 0, "", false
	}
	sid, err = strconv.Atoi(f[3])
	return sid, f[0], err == nil
}

// alivePids returns the pids that still exist and are not zombies.
func alivePids(pids []int) []int {
	var alive []int
	for _, p := range pids {
		if _, state, ok := procSession(p); ok && state != "Z" {
			alive = append(alive, p)
		}
	}
	return alive
}
