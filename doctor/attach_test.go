package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"p2pfault/attach"
)

// healthy is an engine answering /health 200 on loopback.
func healthy(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(s.Close)
	return s.URL
}

// attachFile writes an attach file of a decoder and one source faulted by
// commands (true, found on PATH), P2P on p2p.
func attachFile(t *testing.T, decoder, source string, p2p int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "attach.yaml")
	body := fmt.Sprintf(`model: m
decoder:
  url: %s
sources:
  - name: source-0
    url: %s
    p2p: 127.0.0.1:%d
    faults:
      stall: [true]
      resume: [true]
`, decoder, source, p2p)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// noProc is the host with no process found behind any port, so the
// PYTHONHASHSEED of attached engines is not read.
func noProc() Host {
	h := System()
	h.Listener = func(string, int) (attach.Listener, error) { return attach.Listener{}, attach.ErrNobodyListens }
	return h
}

func TestAttachPassesWhenEveryEngineAnswers(t *testing.T) {
	path := attachFile(t, healthy(t), healthy(t), listen(t))
	fits := 0
	rs := Attach(context.Background(), noProc(), Attached{Path: path, Fits: func(c *attach.Cluster) error {
		fits++
		if len(c.Sources()) != 1 {
			t.Errorf("Fits got %d sources", len(c.Sources()))
		}
		return nil
	}})
	if Failed(rs) != 0 || fits != 1 {
		t.Fatalf("want every line passing and Fits called once (%d):\n%s", fits, lines(rs))
	}
	var checks []string
	for _, r := range rs {
		checks = append(checks, r.Check)
	}
	if got, want := strings.Join(checks, ","), "attach,attach decoder,attach source-0,attach steps"; got != want {
		t.Errorf("checks %s, want %s", got, want)
	}
	if !strings.HasSuffix(rs[2].Found, "listens; faults by command: stall, resume") {
		t.Errorf("source line %q", rs[2].Found)
	}
}

func TestAttachNamesTheEngineThatDoesNotAnswer(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	dead := gone.URL
	gone.Close()
	path := attachFile(t, healthy(t), dead, listen(t))
	rs := Attach(context.Background(), noProc(), Attached{Path: path, Fits: func(*attach.Cluster) error {
		t.Error("Fits called on a cluster that did not open")
		return nil
	}})
	failed := only(rs, "attach")
	if len(failed) != 2 || !failed[0].OK || failed[1].OK {
		t.Fatalf("want the file read, then one failure:\n%s", lines(rs))
	}
	if want := "source-0: " + dead + " unreachable: "; !strings.HasPrefix(failed[1].Found, want) {
		t.Errorf("found %q, want it to start %q", failed[1].Found, want)
	}
	if !strings.Contains(failed[1].Fix, path) {
		t.Errorf("fix %q: want the file named", failed[1].Fix)
	}
}

func TestAttachFailsOnABadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "attach.yaml")
	if err := os.WriteFile(p, []byte("model: m\nrestore_at_ned: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := Attach(context.Background(), noProc(), Attached{Path: p})
	if len(rs) != 1 || rs[0].OK || !strings.Contains(rs[0].Found, `unknown field "restore_at_ned"`) {
		t.Errorf("want one failure naming the field:\n%s", lines(rs))
	}
}

func TestAttachFailsWhenTheRunsStepsDoNotFit(t *testing.T) {
	path := attachFile(t, healthy(t), healthy(t), listen(t))
	rs := Attach(context.Background(), noProc(), Attached{Path: path, Fits: func(*attach.Cluster) error {
		return errors.New(`source-0: kill: the attach file gives no "kill" command`)
	}})
	steps := only(rs, "attach steps")
	if len(steps) != 1 || steps[0].OK || !strings.Contains(steps[0].Found, `no "kill" command`) {
		t.Errorf("want the steps line failing:\n%s", lines(rs))
	}
}

func TestAttachComparesTheEnginesHashSeeds(t *testing.T) {
	dec, src := healthy(t), healthy(t)
	path := attachFile(t, dec, src, listen(t))
	port := func(u string) int {
		pu, _ := url.Parse(u)
		p, _ := strconv.Atoi(pu.Port())
		return p
	}
	pids := map[int]int{port(dec): 100, port(src): 200}
	for _, tc := range []struct {
		name string
		env  map[int][]string
		ok   bool
		want string
	}{
		{"shared", map[int][]string{100: {"PYTHONHASHSEED=42"}, 200: {"HOME=/", "PYTHONHASHSEED=42"}}, true,
			"PYTHONHASHSEED=42 in decoder (pid 100), source-0 (pid 200)"},
		{"different", map[int][]string{100: {"PYTHONHASHSEED=42"}, 200: {"PYTHONHASHSEED=7"}}, false,
			"the engines run with different or random seeds (42: decoder; 7: source-0)"},
		{"unset", map[int][]string{100: {"PYTHONHASHSEED=42"}, 200: {}}, false,
			"the engines run with different or random seeds (42: decoder; unset: source-0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := System()
			h.Listener = func(host string, p int) (attach.Listener, error) {
				if pid, ok := pids[p]; ok {
					return attach.Listener{Pid: pid, Sid: pid, Comm: "vllm"}, nil
				}
				return attach.Listener{}, attach.ErrNobodyListens
			}
			h.ProcEnv = func(pid int) ([]string, error) { return tc.env[pid], nil }
			rs := only(Attach(context.Background(), h, Attached{Path: path}), "attach PYTHONHASHSEED")
			if len(rs) != 1 || rs[0].OK != tc.ok || !strings.HasPrefix(rs[0].Found, tc.want) {
				t.Fatalf("got %v\nwant ok=%v %q", rs, tc.ok, tc.want)
			}
			if !tc.ok && !strings.Contains(rs[0].Found, "hash seed mismatch") {
				t.Errorf("found %q: want the handshake's refusal named", rs[0].Found)
			}
		})
	}
}
