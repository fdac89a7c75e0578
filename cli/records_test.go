package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"p2pfault/cli"
	"p2pfault/internal/sessiontest"
	"p2pfault/runner"
	"p2pfault/runner/session"
)

// setsidSleep starts `sleep 300` in a session of its own: a process that
// p2pfault did not start. It is killed at cleanup, by its session id.
func setsidSleep(t *testing.T) int {
	t.Helper()
	return sessiontest.Sleeper(t, 300)
}

// alive reports whether pid still runs (not a zombie).
func alive(pid int) bool {
	st, err := session.Stat(pid)
	return err == nil && st.Live()
}

// cleanup runs `p2pfault cleanup args...` in this process.
func cleanup(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(append([]string{"cleanup"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestCleanupRefusesPlantedRecords: records are data. A stalls.json
// planted with a resume command does not get it run; a sessions.json
// naming a process p2pfault did not start (pid and start time right, the
// command line an engine's) does not get it ended; a record that is a
// symbolic link, another user's or writable by others is refused whole.
// Each time cleanup says why, and nothing runs or dies.
func TestCleanupRefusesPlantedRecords(t *testing.T) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	dead := runner.ProcID{Pid: os.Getpid(), StartTicks: 1}

	t.Run("stalls.json with a command", func(t *testing.T) {
		dir := t.TempDir()
		marker := filepath.Join(dir, "PWNED")
		b, _ := json.Marshal(map[string]any{"stalls": []map[string]any{{
			"source": "source-0", "resume": []string{"sh", "-c", "id > " + marker},
			"owner": dead, "boot_id": strings.TrimSpace(string(boot)),
		}}})
		if err := os.WriteFile(filepath.Join(dir, "stalls.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errs := cleanup(dir)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("cleanup ran the command the record names")
		}
		want := "source-0: stalled by a command; not resumed, as cleanup runs no command read from a record: give the attach file (`p2pfault cleanup DIR --attach FILE`)"
		if !strings.Contains(out, want) {
			t.Errorf("cleanup said:\n%s\nwant %q", out, want)
		}
	})

	pid := setsidSleep(t)
	engine := []string{"/usr/bin/vllm", "serve", "m"}
	t.Run("sessions.json naming another process", func(t *testing.T) {
		dir := t.TempDir()
		writeSessions(t, dir, pid, engine)
		code, out, errs := cleanup(dir)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		want := "source-0: session " + strconv.Itoa(pid) + ": pid " + strconv.Itoa(pid) + " is `sleep 300`, not the recorded `/usr/bin/vllm serve m`: left alone"
		if !strings.Contains(out, want) || !strings.Contains(out, "ended 0 engine") {
			t.Errorf("cleanup said:\n%s\nwant %q", out, want)
		}
		time.Sleep(100 * time.Millisecond)
		if !alive(pid) {
			t.Fatal("cleanup ended a process p2pfault did not start")
		}
	})

	for _, tt := range []struct {
		name  string
		spoil func(t *testing.T, path string)
		why   string
	}{
		{"writable by others", func(t *testing.T, path string) { chmod(t, path, 0o666) }, "writable by group or others (mode 0666): refused"},
		{"writable by the group", func(t *testing.T, path string) { chmod(t, path, 0o660) }, "writable by group or others (mode 0660): refused"},
		{"a symbolic link", func(t *testing.T, path string) {
			real := path + ".real"
			if err := os.Rename(path, real); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(real, path); err != nil {
				t.Fatal(err)
			}
		}, "a symbolic link: refused"},
		{"another user's", func(t *testing.T, path string) {
			if os.Geteuid() != 0 {
				t.Skip("giving a file to another user needs root")
			}
			if err := os.Chown(path, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 4242, not by uid 0 that runs p2pfault: refused"},
	} {
		t.Run("sessions.json "+tt.name, func(t *testing.T) {
			dir := t.TempDir()
			// The record names the process rightly, command line too: only
			// the file's ownership and mode make cleanup refuse it.
			writeSessions(t, dir, pid, []string{"sleep", "300"})
			path := filepath.Join(dir, runner.SessionsFile)
			tt.spoil(t, path)
			code, out, errs := cleanup(dir)
			if code != 2 || !strings.Contains(errs, path+": "+tt.why) {
				t.Errorf("exit %d, stderr %q; want 2 and %q\n%s", code, errs, path+": "+tt.why, out)
			}
			time.Sleep(100 * time.Millisecond)
			if !alive(pid) {
				t.Fatal("cleanup acted on a record it should have refused")
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestCleanupAttachResumesACommandStallWithTheFilesCommand: `cleanup DIR
// --attach FILE` resumes a source stalled by a command with the resume
// command of FILE, never the one the record holds; a bad FILE is exit 2.
func TestCleanupAttachResumesACommandStallWithTheFilesCommand(t *testing.T) {
	dir := t.TempDir()
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	recorded, fromFile := filepath.Join(dir, "recorded"), filepath.Join(dir, "resumed-pod-a")
	b, _ := json.Marshal(map[string]any{"stalls": []map[string]any{{
		"source": "pod-a", "resume": []string{"touch", recorded},
		"owner": runner.ProcID{Pid: os.Getpid(), StartTicks: 1}, "boot_id": strings.TrimSpace(string(boot)),
	}}})
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "stalls.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "attach.yaml")
	yaml := `model: m
decoder: {url: 'http://10.0.0.1:8200'}
sources:
  - name: pod-a
    url: http://10.0.0.2:8100
    p2p: 10.0.0.2:7777
    faults:
      stall: [touch, "` + dir + `/stalled-{name}"]
      resume: [touch, "` + dir + `/resumed-{name}"]
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, o, e := cleanup(out, "--attach", filepath.Join(dir, "nope.yaml")); code != 2 || !strings.Contains(e, "nope.yaml") {
		t.Errorf("a missing attach file: exit %d %q%q", code, o, e)
	}
	code, o, e := cleanup(out, "--attach", file)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, o, e)
	}
	if _, err := os.Stat(fromFile); err != nil {
		t.Errorf("the attach file's resume command did not run: %v\n%s", err, o)
	}
	if _, err := os.Stat(recorded); err == nil {
		t.Error("the record's resume command ran")
	}
	want := `pod-a: ran the attach file's resume command ["touch" "` + fromFile + `"] (exit 0)`
	if !strings.Contains(o, want) || !strings.Contains(o, "resumed 1 stalled engine") {
		t.Errorf("cleanup said:\n%s\nwant %q", o, want)
	}
}

// TestARunNeverWritesThroughALink: an --out folder in which events.jsonl
// (or another file a run writes) is a symbolic link stops the run at its
// start, exit 2 naming the file, and the link's target is untouched.
func TestARunNeverWritesThroughALink(t *testing.T) {
	for _, name := range []string{"events.jsonl", "sessions.json", "report.md"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "precious")
			if err := os.WriteFile(target, []byte("precious\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			if err := os.Mkdir(out, 0o700); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(out, name)
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := cli.Main([]string{"run", "--headless", "--engine", "virtual", "--duration", "3s", "--out", out}, strings.NewReader(""), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), link+" is a symbolic link: refused") {
				t.Errorf("exit %d, stderr %q; want 2 naming %s", code, stderr.String(), link)
			}
			// At the start: no engine was started, no phase began (not a
			// bound on the time, which a busy machine stretches).
			if o := stdout.String() + stderr.String(); strings.Contains(o, "engine ready") || strings.Contains(o, "phase starting") {
				t.Errorf("refused after the run began:\n%s", o)
			}
			if b, _ := os.ReadFile(target); string(b) != "precious\n" {
				t.Errorf("the link's target now holds %q", b)
			}
			if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Errorf("the link was replaced: %v %v", fi, err)
			}
		})
	}
}

// TestARunWarnsOfARecordItCannotTrust: a run in a folder whose
// sessions.json others could write says so (runner's
// TestNewRunDoesNotCarryARecordItCannotTrust: nor does it carry it).
func TestARunWarnsOfARecordItCannotTrust(t *testing.T) {
	pid := setsidSleep(t)
	dir := t.TempDir()
	writeSessions(t, dir, pid, []string{"sleep", "300"})
	path := filepath.Join(dir, runner.SessionsFile)
	chmod(t, path, 0o666)
	code, _, stderr := runStoppedBeforeEngines(t, dir)
	if code != 2 {
		t.Fatalf("exit %d, want 2 (the port)\n%s", code, stderr.String())
	}
	want := "warning: " + path + ": writable by group or others (mode 0666): refused"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr:\n%s\nwant %q", stderr.String(), want)
	}
}
