package report

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
)

// collect calls Next until want events came (or an error did), polling:
// the tail reads in a goroutine of its own.
func collect(t *testing.T, tail *Tail, want int) ([]event.Event, error) {
	t.Helper()
	var got []event.Event
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		evs, err := tail.Next()
		got = append(got, evs...)
		if err != nil {
			return got, err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return got, nil
}

// TestTailReturnsEachLineOnceItIsComplete: a followed file gives its
// events as their lines complete, never a half-written line, and leaves
// out the events a first read already gave.
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
	write(lines[0] + "\n" + lines[1] + "\n")
	first, _, err := ReadEvents(bytes.NewReader(readFile(t, path)))
	if err != nil || len(first) != 2 {
		t.Fatalf("first read: %d events, %v", len(first), err)
	}
	tail, err := OpenTail(path, len(first))
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()

	half := len(lines[2]) / 2
	write(lines[2][:half])
	time.Sleep(3 * tailPoll) // the tail has seen the half line
	if got, err := tail.Next(); len(got) != 0 || err != nil {
		t.Fatalf("the first two lines (read before) and half a line gave %d events, %v", len(got), err)
	}
	write(lines[2][half:] + "\n")
	if got, err := collect(t, tail, 1); err != nil || !reflect.DeepEqual(got, evs[2:3]) {
		t.Fatalf("the completed line gave %+v, %v", got, err)
	}
	write("\n" + strings.Join(lines[3:], "\n") + "\n")
	if got, err := collect(t, tail, len(evs)-3); err != nil || !reflect.DeepEqual(got, evs[3:]) {
		t.Fatalf("the rest gave %d events (%v), want %d", len(got), err, len(evs)-3)
	}
}

// TestTailNamesADamagedLineAndAShrunkFile: a whole line that is not an
// event, and a file another run rewrote, stop the tail with an error
// naming the file (and the line), after the events before them.
func TestTailNamesADamagedLineAndAShrunkFile(t *testing.T) {
	evs := mainStall().events()
	lines := encodeLines(t, evs[:3])
	dir := t.TempDir()
	tests := []struct {
		name  string
		first string
		then  func(path string) error
		want  string
		evs   int
	}{
		{
			name:  "a whole line that does not parse",
			first: lines[0] + "\n" + lines[1] + "\n",
			then:  func(path string) error { return appendFile(path, "{\"seq\": 3, \"kind\"\n") },
			want:  "line 3: unexpected end of JSON input",
			evs:   2,
		},
		{
			name:  "a line that is JSON but no event",
			first: lines[0] + "\n",
			then:  func(path string) error { return appendFile(path, "[1, 2]\n") },
			want:  "line 2: json: cannot unmarshal array",
			evs:   1,
		},
		{
			name:  "the file shrank",
			first: strings.Join(lines, "\n") + "\n",
			then:  func(path string) error { return os.WriteFile(path, []byte(lines[0]+"\n"), 0o644) },
			want:  "the file shrank",
			evs:   3,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, string(rune('a'+i))+".jsonl")
			if err := os.WriteFile(path, []byte(tt.first), 0o644); err != nil {
				t.Fatal(err)
			}
			tail, err := OpenTail(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer tail.Close()
			got, err := collect(t, tail, tt.evs)
			if err != nil || len(got) != tt.evs {
				t.Fatalf("before the damage: %d events, %v", len(got), err)
			}
			if err := tt.then(path); err != nil {
				t.Fatal(err)
			}
			_, err = collect(t, tail, 1)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("got %v, want an error naming %s and %q", err, path, tt.want)
			}
		})
	}
}

// TestTailCloseStopsItsReader: Close returns while the reader waits at the
// end of a file nobody writes.
func TestTailCloseStopsItsReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileEvents)
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tail, err := OpenTail(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- tail.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
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
