package report

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"p2pfault/runfolder"
)

// zstdEvents writes the main stall fixture's events to a zstd events log
// and returns the file's bytes after each event, and after Close.
func zstdEvents(t *testing.T) (afterEach [][]byte, closed []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileEventsZstd)
	log, err := NewEventLogWith(path, CompressZstd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	for _, ev := range mainStall().events() {
		if err := log.Write(ev); err != nil {
			t.Fatal(err)
		}
		if err := log.Flush(); err != nil {
			t.Fatal(err)
		}
		afterEach = append(afterEach, readFile(t, path))
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	return afterEach, readFile(t, path)
}

func TestZstdEventLogRoundTripsAndIsToldByContent(t *testing.T) {
	_, closed := zstdEvents(t)
	if !bytes.HasPrefix(closed, zstdMagic) {
		t.Fatalf("the file starts % x, want a zstd frame", closed[:min(4, len(closed))])
	}
	got, truncated, err := ReadEvents(bytes.NewReader(closed))
	if err != nil {
		t.Fatal(err)
	}
	if truncated {
		t.Error("a whole compressed run was reported truncated")
	}
	want := jsonRoundTrip(t, mainStall().events())
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %d events, want the %d written", len(got), len(want))
	}
	var plain bytes.Buffer
	for _, l := range encodeLines(t, mainStall().events()) {
		plain.WriteString(l + "\n")
	}
	if len(closed)*3 > plain.Len() {
		t.Errorf("compressed %d bytes of %d: want a third or less", len(closed), plain.Len())
	}
}

// A crashed run's compressed log holds every event flushed before the
// crash, readable as if the plain file had stopped there. Every cut of the
// file reads as a prefix of the events.
func TestZstdEventLogLeavesAReadablePrefixOnACrash(t *testing.T) {
	afterEach, _ := zstdEvents(t)
	want := jsonRoundTrip(t, mainStall().events())
	for i, data := range afterEach {
		got, truncated, err := ReadEvents(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("after %d events (%d bytes, never closed): %v", i+1, len(data), err)
		}
		if !reflect.DeepEqual(got, want[:i+1]) {
			t.Fatalf("after %d events (never closed) read %d events, want every one written", i+1, len(got))
		}
		if !truncated {
			t.Fatalf("after %d events: a frame without its end was not reported truncated", i+1)
		}
	}
	last := afterEach[len(afterEach)-1]
	for cut := 0; cut < len(last); cut += max(1, len(last)/300) {
		got, truncated, err := ReadEvents(bytes.NewReader(last[:cut]))
		if err != nil {
			t.Fatalf("cut at byte %d of %d: %v", cut, len(last), err)
		}
		if !truncated {
			t.Fatalf("cut at byte %d: not reported truncated", cut)
		}
		if len(got) > 0 && !reflect.DeepEqual(got, want[:len(got)]) {
			t.Fatalf("cut at byte %d: the %d events read are not the first ones written", cut, len(got))
		}
	}
}

func TestRebuildReadsEitherEventsFile(t *testing.T) {
	_, closed := zstdEvents(t)
	dir := t.TempDir()
	var plain bytes.Buffer
	for _, l := range encodeLines(t, mainStall().events()) {
		plain.WriteString(l + "\n")
	}
	plainDir, zDir := filepath.Join(dir, "plain"), filepath.Join(dir, "zstd")
	for d, data := range map[string][]byte{filepath.Join(plainDir, FileEvents): plain.Bytes(), filepath.Join(zDir, FileEventsZstd): closed} {
		if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := runfolder.EventsIn(zDir); got != filepath.Join(zDir, FileEventsZstd) {
		t.Fatalf("runfolder.EventsIn(a folder with only the .zst) = %s", got)
	}
	if got := runfolder.EventsIn(plainDir); got != filepath.Join(plainDir, FileEvents) {
		t.Fatalf("runfolder.EventsIn(a folder with events.jsonl) = %s", got)
	}
	a, err := RebuildAll(runfolder.EventsIn(plainDir), plainDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RebuildAll(runfolder.EventsIn(zDir), zDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{FileMarkdown, FileJSON, FileJUnit} {
		pa, pb := readFile(t, filepath.Join(plainDir, f)), readFile(t, filepath.Join(zDir, f))
		if f == FileJSON {
			// report.json says when it was written.
			pa, pb = dropLine(pa, "generated"), dropLine(pb, "generated")
		}
		if !bytes.Equal(pa, pb) {
			t.Errorf("%s from events.jsonl and from events.jsonl.zst differ:\n%s\n---\n%s", f, pa, pb)
		}
	}
	if Table(Rows(a)) != Table(Rows(b)) {
		t.Errorf("tables differ:\n%s\n%s", Table(Rows(a)), Table(Rows(b)))
	}
}

func dropLine(b []byte, key string) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if !bytes.Contains(l, []byte(`"`+key+`"`)) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func TestParseCompression(t *testing.T) {
	for in, want := range map[string]Compression{"": CompressNone, "none": CompressNone, "zstd": CompressZstd} {
		if got, err := ParseCompression(in); err != nil || got != want {
			t.Errorf("ParseCompression(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseCompression("gzip"); err == nil {
		t.Error("gzip accepted")
	}
}
