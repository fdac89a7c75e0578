// Package engineargs reads options from an engine's command line, in
// vLLM's (argparse's) syntax: `--name value` or `--name=value`, the last
// one given winning. It is the one reader of an engine's own arguments
// for every cluster that has them: a launched engine's /proc cmdline
// (runner's rank markers) and a pod's container command (kube's
// data-parallel ranks).
package engineargs

import (
	"fmt"
	"strconv"
)

// DataParallelSize are the spellings of vLLM's --data-parallel-size.
var DataParallelSize = []string{"--data-parallel-size", "-dp"}

// Value is the value argv gives the option spelled any of names (the last
// one given, as argparse takes it), and whether it gives one.
func Value(argv []string, names ...string) (string, bool) {
	v, found := "", false
	for i, a := range argv {
		if a == "--" {
			break // what follows is not the engine's options
		}
		for _, n := range names {
			switch {
			case len(a) > len(n) && a[:len(n)] == n && a[len(n)] == '=':
				v, found = a[len(n)+1:], true
			case a == n && i+1 < len(argv):
				v, found = argv[i+1], true
			}
		}
	}
	return v, found
}

// Int is the positive integer argv gives the option spelled any of names,
// def when it gives none; an error names the option and the bad value.
func Int(argv []string, def int, names ...string) (int, error) {
	v, ok := Value(argv, names...)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s %q: want a positive integer", names[0], v)
	}
	return n, nil
}
