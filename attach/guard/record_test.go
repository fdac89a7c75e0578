package guard

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"p2pfault/internal/sessiontest"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

// plant writes stalls into dir's stalls.json as someone other than a
// running p2pfault would: by hand, owner gone, this boot.
func plant(t *testing.T, dir string, mode os.FileMode, stalls ...Stall) string {
	t.Helper()
	dead := runner.ProcID{Pid: 1 << 22, StartTicks: 1}
	for i := range stalls {
		stalls[i].Owner, stalls[i].BootID = dead, BootID()
	}
	b, err := json.Marshal(Record{Stalls: stalls})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, RecordFile)
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCleanupRunsNoCommandFromTheRecord: a stalls.json whose stall holds
// a resume command is not a reason to run it; cleanup says what it
// cannot undo and how, and keeps the stall. Given the attach file's
// command (ResumeFrom), it runs that one instead, and the stall is done.
func TestCleanupRunsNoCommandFromTheRecord(t *testing.T) {
	dir := t.TempDir()
	planted := filepath.Join(dir, "PWNED")
	path := plant(t, dir, 0o600, Stall{Source: "source-0", Resume: []string{"sh", "-c", "touch " + planted}})
	var out strings.Builder
	n, err := ResumeRecorded(context.Background(), path, &out, nil)
	if err != nil || n != 0 {
		t.Fatalf("%d %v %q", n, err, out.String())
	}
	if _, err := os.Stat(planted); err == nil {
		t.Fatal("cleanup ran the command read from the record")
	}
	for _, want := range []string{"source-0: stalled by a command; not resumed, as cleanup runs no command read from a record", "p2pfault cleanup DIR --attach FILE"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
	if rec, _ := ReadRecord(path); len(rec.Stalls) != 1 {
		t.Errorf("the stall was dropped unresumed: %+v", rec.Stalls)
	}

	fromFile := filepath.Join(dir, "resumed-by-file")
	var asked string
	from := func(source string) ([]string, error) {
		asked = source
		return []string{"sh", "-c", "touch " + fromFile}, nil
	}
	out.Reset()
	n, err = ResumeRecorded(context.Background(), path, &out, from)
	if err != nil || n != 1 || asked != "source-0" {
		t.Fatalf("with the file: %d %v asked %q: %q", n, err, asked, out.String())
	}
	if _, err := os.Stat(planted); err == nil {
		t.Error("the record's command ran")
	}
	if _, err := os.Stat(fromFile); err != nil {
		t.Errorf("the attach file's command did not run: %v\n%s", err, out.String())
	}
	if rec, _ := ReadRecord(path); len(rec.Stalls) != 0 {
		t.Errorf("record keeps %+v", rec.Stalls)
	}
}

// TestCleanupLeavesAProcessItCannotTellIsTheOneStalled: a stall record
// naming a stopped process by its pid and start time but with another
// command line (or none) is not resumed, and cleanup says why.
func TestCleanupLeavesAProcessItCannotTellIsTheOneStalled(t *testing.T) {
	id := stopped(t)
	for _, tt := range []struct {
		name     string
		cmdlines runner.Cmdlines
		why      string
	}{
		{"other command line", runner.Cmdlines{id.Pid: {"vllm", "serve", "m"}}, "pid " + strconv.Itoa(id.Pid) + " is `sleep 60`, not the recorded `vllm serve m`: left alone"},
		{"none recorded", nil, "pid " + strconv.Itoa(id.Pid) + " (`sleep 60`) has no command line in the record to check it by: left alone"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := plant(t, t.TempDir(), 0o600, Stall{Source: "not-an-engine", Sid: id.Pid, Members: []runner.ProcID{id}, Cmdlines: tt.cmdlines})
			var out strings.Builder
			n, err := ResumeRecorded(context.Background(), path, &out, nil)
			if err != nil || n != 0 || !strings.Contains(out.String(), "not-an-engine: session "+strconv.Itoa(id.Pid)+": "+tt.why) {
				t.Errorf("%d %v %q, want …%q", n, err, out.String(), tt.why)
			}
			if s := sessiontest.State(t, id.Pid); s != 'T' {
				t.Errorf("state %c: cleanup continued a process it could not tell was the one stalled", s)
			}
		})
	}
}

// TestCleanupSaysASessionAlreadyRuns: a stall whose guard resumed it
// before dying is reported as running, not as resumed by cleanup.
func TestCleanupSaysASessionAlreadyRuns(t *testing.T) {
	pid := sessiontest.Sleeper(t, 60)
	st, err := session.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	id := runner.ProcID{Pid: pid, StartTicks: st.StartTicks}
	path := plant(t, t.TempDir(), 0o600, Stall{Source: "source-0", Sid: pid, Members: []runner.ProcID{id}, Cmdlines: runner.ReadCmdlines(pid)})
	var out strings.Builder
	n, err := ResumeRecorded(context.Background(), path, &out, nil)
	if err != nil || n != 0 {
		t.Fatalf("%d %v %q", n, err, out.String())
	}
	want := "source-0: session " + strconv.Itoa(pid) + " is already running"
	if !strings.Contains(out.String(), want) || strings.Contains(out.String(), "resumed session") {
		t.Errorf("output %q, want %q and no \"resumed session\"", out.String(), want)
	}
}

// TestCleanupRefusesARecordOthersCouldWrite: a group-writable, a
// symbolic link or another user's stalls.json is refused, naming the
// file and why; the stopped process it names stays stopped.
func TestCleanupRefusesARecordOthersCouldWrite(t *testing.T) {
	id := stopped(t)
	stall := Stall{Source: "source-0", Sid: id.Pid, Members: []runner.ProcID{id}, Cmdlines: runner.ReadCmdlines(id.Pid)}
	for _, tt := range []struct {
		name string
		make func(dir string) string
		why  string
	}{
		{"group-writable", func(dir string) string { return plant(t, dir, 0o664, stall) }, "writable by group or others (mode 0664): refused"},
		{"symlink", func(dir string) string {
			real := plant(t, t.TempDir(), 0o600, stall)
			link := filepath.Join(dir, RecordFile)
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "a symbolic link: refused"},
		{"another user's", func(dir string) string {
			p := plant(t, dir, 0o600, stall)
			if os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			if err := os.Chown(p, 4242, 4242); err != nil {
				t.Fatal(err)
			}
			return p
		}, "owned by uid 4242, not by uid 0 that runs p2pfault: refused"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.make(t.TempDir())
			var out strings.Builder
			n, err := ResumeRecorded(context.Background(), path, &out, nil)
			if err == nil || n != 0 || !strings.Contains(err.Error(), path+": "+tt.why) {
				t.Errorf("%d %v %q, want an error %q", n, err, out.String(), path+": "+tt.why)
			}
			if s := sessiontest.State(t, id.Pid); s != 'T' {
				t.Errorf("state %c: a refused record's stall was resumed", s)
			}
		})
	}
}
