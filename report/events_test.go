package report

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"p2pfault/event"
)

func encodeLines(t *testing.T, evs []event.Event) []string {
	t.Helper()
	lines := make([]string, len(evs))
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		lines[i] = string(b)
	}
	return lines
}

func TestEventLogFlushesEveryEventAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileEvents)
	log, err := NewEventLogWith(path, CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	evs := mainStall().events()
	for i, ev := range evs[:5] {
		if err := log.Write(ev); err != nil {
			t.Fatal(err)
		}
		// Read the file as a crashed process would leave it: nothing
		// closed, nothing synced.
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(string(data), "\n"); got != i+1 {
			t.Fatalf("after %d writes the file holds %d lines", i+1, got)
		}
	}
	got, truncated, err := ReadEvents(bytes.NewReader(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	if !truncated {
		t.Error("a log without its end event was not reported truncated")
	}
	if !reflect.DeepEqual(got, evs[:5]) {
		t.Fatalf("read back %+v\nwant %+v", got, evs[:5])
	}
}

func TestEventLogRoundTripsAWholeRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileEvents)
	log, err := NewEventLogWith(path, CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	evs := mainStall().events()
	// Events come from several goroutines in a run (probe, engines, fault
	// timeline); lines must never interleave.
	var wg sync.WaitGroup
	for part := range 4 {
		wg.Go(func() {
			for i := part; i < len(evs); i += 4 {
				if err := log.Write(evs[i]); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := log.Write(evs[0]); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Write after Close = %v, want an error naming %s", err, path)
	}
	got, truncated, err := ReadEvents(bytes.NewReader(readFile(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	if truncated {
		t.Error("a whole run was reported truncated")
	}
	if len(got) != len(evs) {
		t.Fatalf("read %d events, wrote %d", len(got), len(evs))
	}
}

func TestNewEventLogNamesTheBadPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-folder", FileEvents)
	_, err := NewEventLogWith(path, CompressNone)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("NewEventLogWith(%s) = %v, want an error naming the path", path, err)
	}
}

func TestReadEvents(t *testing.T) {
	evs := mainStall().events()
	lines := encodeLines(t, evs)
	whole := strings.Join(lines, "\n") + "\n"
	withoutEnd := strings.Join(lines[:len(lines)-1], "\n") + "\n"
	last := lines[len(lines)-2]
	cut := strings.Join(lines[:len(lines)-2], "\n") + "\n" + last[:len(last)/2]

	cases := []struct {
		name          string
		in            string
		wantN         int
		wantTruncated bool
		wantErr       string
	}{
		{name: "a whole run is not truncated", in: whole, wantN: len(evs)},
		{name: "a whole run without the final newline is not truncated", in: strings.TrimSuffix(whole, "\n"), wantN: len(evs)},
		{name: "blank lines are skipped", in: strings.ReplaceAll(whole, "\n", "\n\n"), wantN: len(evs)},
		{name: "no end event is truncated", in: withoutEnd, wantN: len(evs) - 1, wantTruncated: true},
		{name: "a last line cut mid-way is dropped and truncated", in: cut, wantN: len(evs) - 2, wantTruncated: true},
		{name: "an empty file is truncated", in: "", wantN: 0, wantTruncated: true},
		{name: "a bad line in the middle is an error naming its line",
			in:      strings.Join(lines[:2], "\n") + "\n{not json\n" + strings.Join(lines[2:], "\n") + "\n",
			wantErr: "events line 3:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, truncated, err := ReadEvents(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.wantN || truncated != tc.wantTruncated {
				t.Fatalf("got %d events truncated=%v, want %d truncated=%v", len(got), truncated, tc.wantN, tc.wantTruncated)
			}
			// Compare with the events as JSON carries them: event.Stats
			// leaves P50 and Max out of JSON.
			if want := jsonRoundTrip(t, evs[:tc.wantN]); tc.wantN > 0 && !reflect.DeepEqual(got, want) {
				t.Fatal("events read back differ from those written")
			}
		})
	}
}

func jsonRoundTrip(t *testing.T, evs []event.Event) []event.Event {
	t.Helper()
	out := make([]event.Event, len(evs))
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzRebuildNeverPanics feeds damaged logs through every reader and
// writer: bad input must come back as an error, never a panic.
func FuzzRebuildNeverPanics(f *testing.F) {
	// Small seeds: Go's fuzzer crawls on inputs of tens of kilobytes, and a
	// whole fixture run is 54 kB.
	fx := mainStall()
	var small []event.Event
	for _, ev := range fx.events() {
		if ev.Kind == event.KindSamples {
			ev.Samples = ev.Samples[:1]
		}
		small = append(small, ev)
	}
	var whole bytes.Buffer
	for _, ev := range small[:12] {
		b, err := json.Marshal(ev)
		if err != nil {
			f.Fatal(err)
		}
		whole.Write(append(b, '\n'))
	}
	f.Add(whole.Bytes())
	f.Add(whole.Bytes()[:whole.Len()/2])
	f.Add([]byte(`{"kind":"run","run":{"arm":"a","case":"c","sources":-7,"bounds":{"FaultedMax":-1}}}` + "\n" +
		`{"kind":"samples","t_ns":5,"samples":[{"source":-7,"start_ns":-9,"latency_ns":-1,"status":200,"cached_tokens":1}]}` + "\n" +
		`{"kind":"window","window":{"source":-7,"start_ns":9,"end_ns":0,"recovers":true}}` + "\n"))
	f.Add([]byte(`{"kind":"verdict","final":true,"verdict":{"passed":true,"checks":null}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, _, err := ReadEvents(bytes.NewReader(data))
		if err != nil {
			return
		}
		run, err := FromEvents(evs)
		if err != nil {
			return
		}
		rows := []Row{run.Row()}
		_ = WriteMarkdown(io.Discard, rows...)
		_ = WriteJSON(io.Discard, rows...)
		_ = WriteJUnit(io.Discard, run)
		_ = WriteSVG(io.Discard, run)
		_ = Table(rows)
	})
}
