package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The module's path, and the prefix its packages' import paths share.
const module = "p2pfault"

// rule is one row of docs/architecture.md's import table: the packages it
// names, the p2pfault packages they may import (any: the wiring), and the
// ones they may not depend on at all, directly or not.
type rule struct {
	line      int
	name      string
	pkgs      []string
	any       bool
	allowed   []string
	forbidden []string
}

// pkgInfo is what `go list -json` says of one of the module's packages,
// imports and dependencies named relative to the module ("runner/session";
// the module's own package is "p2pfault").
type pkgInfo struct {
	Imports []string
	Deps    []string
}

// TestArchitecture: every row of docs/architecture.md's table holds
// (one subtest per row, named after its packages), every package has a
// row, and no package but a test imports the tests' helpers (internal/).
// The rules are the table's, so the table is what a contributor reads and
// what this test enforces.
func TestArchitecture(t *testing.T) {
	pkgs := listPackages(t)
	rules := readRules(t, "docs/architecture.md", pkgs)
	seen := map[string]string{}
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			for _, p := range r.pkgs {
				checkRule(t, r, p, pkgs)
			}
		})
		for _, p := range r.pkgs {
			if prev, ok := seen[p]; ok {
				t.Errorf("docs/architecture.md:%d: %s has a row already (%s)", r.line, p, prev)
			}
			seen[p] = r.name
		}
	}
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		if _, ok := seen[p]; !ok {
			t.Errorf("package %s has no row in docs/architecture.md's import table: add one (what it imports, what it knows nothing of)", p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(pkgs)) {
		info := pkgs[p]
		if strings.HasPrefix(p, "internal/") {
			continue
		}
		for _, d := range info.Deps {
			if strings.HasPrefix(d, "internal/") {
				t.Errorf("%s depends on %s (through %s): internal/ holds the tests' helpers, which only tests import", p, d, strings.Join(chain(pkgs, p, d), " → "))
			}
		}
	}
}

// checkRule checks one package of row r: its imports, then its
// dependencies.
func checkRule(t *testing.T, r rule, p string, pkgs map[string]pkgInfo) {
	t.Helper()
	info, ok := pkgs[p]
	if !ok {
		t.Errorf("docs/architecture.md:%d: row %q names %s, which is not a package of the module", r.line, r.name, p)
		return
	}
	for _, imp := range info.Imports {
		if !r.any && !slices.Contains(r.allowed, imp) {
			t.Errorf("%s imports %s, which its row in docs/architecture.md (line %d, %q) does not allow (it allows: %s)", p, imp, r.line, r.name, orNone(r.allowed))
		}
	}
	for _, f := range r.forbidden {
		if slices.Contains(info.Deps, f) {
			t.Errorf("%s depends on %s (through %s), which its row in docs/architecture.md (line %d, %q) says it knows nothing of", p, f, strings.Join(chain(pkgs, p, f), " → "), r.line, r.name)
		}
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// chain is a shortest import path from p to dep (both included), so a
// message says which import brought a forbidden package in.
func chain(pkgs map[string]pkgInfo, p, dep string) []string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == dep {
			path := []string{}
			for at := dep; at != ""; at = prev[at] {
				path = append([]string{at}, path...)
			}
			return path
		}
		for _, imp := range pkgs[cur].Imports {
			if _, ok := prev[imp]; !ok {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return []string{p, "?", dep}
}

// listPackages runs `go list -json ./...` once: every package of the
// module (tests' own imports left out: a rule is about what a build
// carries), with its imports and dependencies inside the module.
func listPackages(t *testing.T) map[string]pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]pkgInfo{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Deps       []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list's output: %v", err)
		}
		pkgs[rel(p.ImportPath)] = pkgInfo{Imports: ours(p.Imports), Deps: ours(p.Deps)}
	}
	return pkgs
}

// rel names a package of the module relative to it ("p2pfault/runner" is
// "runner"; the module's own package keeps its name).
func rel(path string) string {
	if path == module {
		return path
	}
	return strings.TrimPrefix(path, module+"/")
}

// ours keeps the module's packages of paths, relative to it.
func ours(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == module || strings.HasPrefix(p, module+"/") {
			out = append(out, rel(p))
		}
	}
	return out
}

var backticked = regexp.MustCompile("`([^`]+)`")

// readRules reads the import table of the architecture page at path: the
// rows after the header "| package | imports (p2pfault) | knows nothing of |".
// In the second and third columns, the words in backticks that name a
// package of the module are the rule (the rest explains it).
func readRules(t *testing.T, path string, pkgs map[string]pkgInfo) []rule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []rule
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| package | imports (p2pfault) | knows nothing of |"):
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "| "):
			rules = append(rules, parseRule(t, path, n, line, pkgs))
		case in:
			in = false
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no import table (a header \"| package | imports (p2pfault) | knows nothing of |\")", path)
	}
	return rules
}

// parseRule reads one row of the table, on line n of path.
func parseRule(t *testing.T, path string, n int, line string, pkgs map[string]pkgInfo) rule {
	t.Helper()
	cells := strings.Split(strings.Trim(line, "| "), " | ")
	if len(cells) != 3 {
		t.Fatalf("%s:%d: a row of the import table has 3 columns, this one %d: %s", path, n, len(cells), line)
	}
	r := rule{line: n, any: strings.HasPrefix(cells[1], "any")}
	for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
		r.pkgs = append(r.pkgs, m[1])
	}
	if len(r.pkgs) == 0 {
		t.Fatalf("%s:%d: the row names no package in backticks: %s", path, n, line)
	}
	r.name = strings.Join(r.pkgs, ",")
	named := func(cell string) []string {
		var out []string
		for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
			if _, ok := pkgs[m[1]]; ok {
				out = append(out, m[1])
			}
		}
		return out
	}
	r.allowed, r.forbidden = named(cells[1]), named(cells[2])
	return r
}
