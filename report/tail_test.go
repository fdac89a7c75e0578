package report

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"p2pfault/event"
)

// TestTailReturnsEachLineOnceItIsComplete: a followed file gives its
// events as their lines complete, never a half-written line.
func TestTailReturnsEachLineOnceItIsComplete(t *testing.T) {
	evs := mainStall().events()
	lines := encodeLines(t, evs)
	path := filepath.Join(t.TempDir(), FileEvents)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	write := func(s string) {
		t.Helper()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	tail, err := OpenTail(path)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	next := func() []event.Event {
		t.Helper()
		got, err := tail.Next()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := next(); len(got) != 0 {
		t.Fatalf("an empty file gave %d events", len(got))
	}
	write(lines[0] + "\n" + lines[1] + "\n")
	if got := next(); !reflect.DeepEqual(got, evs[:2]) {
		t.Fatalf("two lines gave %+v", got)
	}
	half := len(lines[2]) / 2
	write(lines[2][:half])
	if got := next(); len(got) != 0 {
		t.Fatalf("half a line gave %d events", len(got))
	}
	write(lines[2][half:] + "\n")
	if got := next(); !reflect.DeepEqual(got, evs[2:3]) {
		t.Fatalf("the completed line gave %+v", got)
	}
	write(strings.Join(lines[3:], "\n") + "\n")
	if got := next(); !reflect.DeepEqual(got, evs[3:]) {
		t.Fatalf("the rest gave %d events, want %d", len(got), len(evs)-3)
	}
}

// TestTailNamesADamagedLineAndAShrunkFile: a whole line that is not an
// event, and a file another run rewrote, are errors naming the file and
// the line.
func TestTailNamesADamagedLineAndAShrunkFile(t *testing.T) {
	evs := mainStall().events()
	lines := encodeLines(t, evs[:3])
	dir := t.TempDir()
	tests := []struct {
		name  string
		first string
		then  func(path string) error
		want  string
	}{
		{
			name:  "a whole line that does not parse",
			first: lines[0] + "\n" + lines[1] + "\n",
			then: func(path string) error {
				return appendFile(path, "{\"seq\": 3, \"kind\"\n")
			},
			want: "line 3: unexpected end of JSON input",
		},
		{
			name:  "the file shrank",
			first: strings.Join(lines, "\n") + "\n",
			then:  func(path string) error { return os.WriteFile(path, []byte(lines[0]+"\n"), 0o644) },
			want:  "the file shrank",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, string(rune('a'+i))+".jsonl")
			if err := os.WriteFile(path, []byte(tt.first), 0o644); err != nil {
				t.Fatal(err)
			}
			tail, err := OpenTail(path)
			if err != nil {
				t.Fatal(err)
			}
			defer tail.Close()
			if _, err := tail.Next(); err != nil {
				t.Fatal(err)
			}
			if err := tt.then(path); err != nil {
				t.Fatal(err)
			}
			_, err = tail.Next()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("got %v, want an error naming %s and %q", err, path, tt.want)
			}
		})
	}
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}
