package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// plantLink makes dir/name a symbolic link to a file holding "precious"
// and returns the target.
func plantLink(t *testing.T, dir, name string) string {
	t.Helper()
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return target
}

func untouched(t *testing.T, target string) {
	t.Helper()
	if b, err := os.ReadFile(target); err != nil || string(b) != "precious" {
		t.Errorf("the link's target was changed: %q %v", b, err)
	}
}

// TestWritersNeverFollowALink: Create, Append and Write refuse a symbolic
// link where they write, naming the file, and leave its target as it was.
func TestWritersNeverFollowALink(t *testing.T) {
	for name, write := range map[string]func(string) error{
		"create": func(p string) error { f, err := Create(p, ReportPerm); closeIf(f); return err },
		"append": func(p string) error { f, err := Append(p, ReportPerm); closeIf(f); return err },
		"write":  func(p string) error { return Write(p, []byte("new"), RecordPerm) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			target := plantLink(t, dir, "events.jsonl")
			err := write(filepath.Join(dir, "events.jsonl"))
			var le *LinkError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), filepath.Join(dir, "events.jsonl")+" is a symbolic link: refused") {
				t.Errorf("error %v, want a LinkError naming the file", err)
			}
			untouched(t, target)
		})
	}
}

func closeIf(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// TestCreateTruncatesAndAppendKeeps: a regular file is truncated by
// Create and appended to by Append; new files get the mode asked for.
func TestCreateTruncatesAndAppendKeeps(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old old old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p, ReportPerm)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("a\n")
	f.Close()
	f, err = Append(p, ReportPerm)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("b\n")
	f.Close()
	if b, _ := os.ReadFile(p); string(b) != "a\nb\n" {
		t.Errorf("content %q", b)
	}
	if err := Write(filepath.Join(dir, "rec"), []byte("{}"), RecordPerm); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "rec")); st.Mode().Perm() != RecordPerm {
		t.Errorf("record mode %v", st.Mode())
	}
}

// TestWritersRefusePipesAndHardLinks: a named pipe does not hang the open
// and a file with a second name elsewhere is not written.
func TestWritersRefusePipesAndHardLinks(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(fifo, ReportPerm); err == nil || !strings.Contains(err.Error(), "a named pipe") && !errors.Is(err, syscall.ENXIO) {
		t.Errorf("fifo: %v", err)
	}
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(other, filepath.Join(dir, "hard")); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(filepath.Join(dir, "hard"), ReportPerm); err == nil || !strings.Contains(err.Error(), "2 hard links") {
		t.Errorf("hard link: %v", err)
	}
	untouched(t, other)
}

// TestReadRecordTrustsOnlyTheUsersOwnFiles: a record is read only when it
// is a regular file of this user that no one else can write; otherwise
// the error names the file and why, as ssh does for a key.
func TestReadRecordTrustsOnlyTheUsersOwnFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode fs.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("{}"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	if b, err := ReadRecord(write("ok.json", 0o600)); err != nil || string(b) != "{}" {
		t.Errorf("own 0600 record: %q %v", b, err)
	}
	if _, err := ReadRecord(write("ro.json", 0o644)); err != nil {
		t.Errorf("own 0644 record: %v", err)
	}
	if _, err := ReadRecord(filepath.Join(dir, "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	plantLink(t, dir, "link.json")
	other := write("other.json", 0o600)
	if os.Geteuid() == 0 {
		if err := os.Chown(other, 4242, 4242); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ path, why string }{
		{write("g.json", 0o620), "g.json: writable by group or others (mode 0620): refused"},
		{write("o.json", 0o666), "o.json: writable by group or others (mode 0666): refused"},
		{filepath.Join(dir, "link.json"), "link.json: a symbolic link: refused"},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct{ path, why string }{other, "other.json: owned by uid 4242, not by uid 0 that runs p2pfault: refused"})
	}
	for _, c := range cases {
		_, err := ReadRecord(c.path)
		var te *TrustError
		if !errors.As(err, &te) || !strings.HasSuffix(err.Error(), c.why) {
			t.Errorf("%s: %v, want …%q", c.path, err, c.why)
		}
	}
}
