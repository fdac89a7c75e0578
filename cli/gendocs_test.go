package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"p2pfault/cli"
)

// regenerate is how a stale reference is brought up to date.
const regenerate = "regenerate it with `go generate ./cli` (or `go run . gen-docs docs/cli`) and commit docs/cli"

// TestCLIReferenceIsCurrent: docs/cli holds exactly what `p2pfault
// gen-docs` writes from today's commands, file by file, so the reference
// cannot drift from --help; a command, flag or help text changed without
// regenerating fails here, naming the file.
func TestCLIReferenceIsCurrent(t *testing.T) {
	want := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"gen-docs", want}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("gen-docs exit %d: %s", code, stderr.String())
	}
	committed := filepath.Join("..", "docs", "cli")
	names := func(dir string) []string {
		found, err := filepath.Glob(filepath.Join(dir, "p2pfault*.md"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range found {
			out = append(out, filepath.Base(f))
		}
		return out
	}
	gen, have := names(want), names(committed)
	if len(gen) < 10 {
		t.Fatalf("gen-docs wrote %d files (%q), want one per command", len(gen), gen)
	}
	for _, n := range gen {
		if !slices.Contains(have, n) {
			t.Errorf("docs/cli/%s is missing (a command without its page): %s", n, regenerate)
			continue
		}
		a, err := os.ReadFile(filepath.Join(want, n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(committed, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("docs/cli/%s is stale: it differs from the commands' help at line %d: %s", n, firstDiffLine(a, b), regenerate)
		}
	}
	for _, n := range have {
		if !slices.Contains(gen, n) {
			t.Errorf("docs/cli/%s names a command p2pfault no longer has: %s", n, regenerate)
		}
	}
}

// TestGenDocsIsDeterministic: two generations give the same bytes (no
// date stamp), and a file of a command that is gone is removed while a
// file of another name is left alone.
func TestGenDocsIsDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	gone := filepath.Join(b, "p2pfault_gone.md")
	other := filepath.Join(b, "README.md")
	for _, f := range []string{gone, other} {
		if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{a, b} {
		var stdout, stderr bytes.Buffer
		if code := cli.Main([]string{"gen-docs", dir}, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("gen-docs exit %d: %s", code, stderr.String())
		}
	}
	if _, err := os.Stat(gone); err == nil {
		t.Error("gen-docs left the page of a command that is gone")
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("gen-docs removed a file it does not own: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(a, "*.md"))
	for _, f := range files {
		x, _ := os.ReadFile(f)
		y, err := os.ReadFile(filepath.Join(b, filepath.Base(f)))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two generations (%v)", filepath.Base(f), err)
		}
		if bytes.Contains(x, []byte("Auto generated")) {
			t.Errorf("%s carries cobra's date stamp", filepath.Base(f))
		}
	}
}

// firstDiffLine is the first line (from 1) at which a and b differ.
func firstDiffLine(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}
