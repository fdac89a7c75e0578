package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAnnotationsAreTheFaultWindowsWithTheirVerdicts: the seed's failing
// main stall and passing fixed stall give one Grafana annotation each, from
// the window's start to its end in Unix ms on the run's wall clock, tagged
// kind, source, arm, verdict, the failed checks in the text; WriteAll puts
// them in annotations.json.
func TestAnnotationsAreTheFaultWindowsWithTheirVerdicts(t *testing.T) {
	var runs []Run
	for _, f := range []fixture{mainStall(), fixedStall()} {
		f.window.Kind = "stall"
		runs = append(runs, f.run(t))
	}
	got := Annotations(runs)
	if len(got) != 2 {
		t.Fatalf("%d annotations, want 2: %+v", len(got), got)
	}
	start, end := wall0().Add(10*time.Second).UnixMilli(), wall0().Add(40*time.Second).UnixMilli()
	for i, want := range [][]string{{"stall", "source-0", "main", "failed"}, {"stall", "source-0", "+ #64501", "passed"}} {
		a := got[i]
		if a.Time != start || a.TimeEnd != end {
			t.Errorf("annotation %d spans %d..%d, want %d..%d", i, a.Time, a.TimeEnd, start, end)
		}
		if !slices.Equal(a.Tags, want) {
			t.Errorf("annotation %d tags %q, want %q", i, a.Tags, want)
		}
	}
	if !strings.Contains(got[0].Text, "faulted_max: ") || strings.Contains(got[1].Text, "\n") {
		t.Errorf("texts do not list exactly the failed checks:\n%s\n--\n%s", got[0].Text, got[1].Text)
	}

	dir := t.TempDir()
	if err := WriteAll(dir, runs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileAnnotations))
	if err != nil {
		t.Fatal(err)
	}
	var file []Annotation
	if err := json.Unmarshal(b, &file); err != nil || len(file) != 2 || file[0].Time != start {
		t.Fatalf("annotations.json: %v %+v\n%s", err, file, b)
	}
}
