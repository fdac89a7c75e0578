package doctor

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"p2pfault/runner"
)

// binary is one engine program the run starts and the engines it starts
// with it.
type binary struct {
	path   string // as planned (Spec.Path)
	engine string // runner.EngineSim or runner.EngineVLLM
	arms   []string
	specs  []runner.Spec
	extra  map[string]bool // options the user or the arm added (--engine-arg, the arm's flag)
}

// binaries groups the clusters' engines by program, in order.
func binaries(clusters []Cluster) []*binary {
	var bs []*binary
	byPath := map[string]*binary{}
	for _, c := range clusters {
		engine := c.Config.Engine
		if engine == "" {
			engine = runner.EngineSim
		}
		for _, s := range c.Specs {
			b, ok := byPath[s.Path]
			if !ok {
				b = &binary{path: s.Path, engine: engine, extra: map[string]bool{}}
				byPath[s.Path] = b
				bs = append(bs, b)
			}
			if !slices.Contains(b.arms, c.Arm) {
				b.arms = append(b.arms, c.Arm)
			}
			b.specs = append(b.specs, s)
			for _, a := range append(append(append([]string{}, c.Config.ExtraArgs...), c.Config.SourceArgs...), c.Config.DecoderArgs...) {
				if isOption(a) {
					b.extra[optionName(a, b.vllm())] = true
				}
			}
		}
	}
	return bs
}

func (b *binary) vllm() bool { return b.engine == runner.EngineVLLM }

// name is the check's name: "vllm", "sim engine", "vllm serve flags",
// with the arms when the run starts several programs.
func (b *binary) name(several bool, what string) string {
	n := "sim"
	if b.vllm() {
		n = "vllm"
	}
	if what == "" && !b.vllm() {
		what = " engine"
	}
	n += what
	if several {
		n += " (arm " + strings.Join(b.arms, ", ") + ")"
	}
	return n
}

// Engines checks each engine program the run starts: that it is there
// and runs (vllm --version), and that its `serve` knows every option the
// run passes it.
func Engines(ctx context.Context, h Host, clusters []Cluster) []Result {
	bs := binaries(clusters)
	var rs []Result
	for _, b := range bs {
		several := len(bs) > 1
		r := Result{Check: b.name(several, "")}
		path, err := h.LookPath(b.path)
		if err != nil {
			r.Found = fmt.Sprintf("binary %q: %v", b.path, err)
			r.Fix = "install vLLM, or give its path with --vllm-bin PATH (--arm NAME=PATH for an arm)"
			if !b.vllm() {
				r.Fix = "rebuild p2pfault (go build -o p2pfault .) and run that binary"
			}
			rs = append(rs, r)
			continue
		}
		if b.vllm() {
			out, err := h.Exec(ctx, path, "--version")
			if err != nil {
				r.Found = fmt.Sprintf("%s --version failed (%v): %s", path, err, lastLine(out))
				r.Fix = "repair this vLLM install (it must start to serve), or point --vllm-bin at one that works"
				rs = append(rs, r)
				continue
			}
			r.OK, r.Found = true, fmt.Sprintf("%s, version %s", path, lastLine(out))
		} else {
			r.OK, r.Found = true, fmt.Sprintf("%s sim serve: p2pfault's own simulated engine%s", path, revision())
		}
		rs = append(rs, r, serveFlags(ctx, h, b, path, several))
	}
	return rs
}

// serveFlags asks the program's `serve` for its options and checks every
// option of every engine's command line against them.
func serveFlags(ctx context.Context, h Host, b *binary, path string, several bool) Result {
	r := Result{Check: b.name(several, " serve flags")}
	prefix := serveArgs(b.specs[0].Args)
	// vLLM's own parser shows only its groups for --help since it grouped
	// its flags (FlexibleArgumentParser.format_help); --help=all lists
	// them. Builds from before that reject --help=all and list every flag
	// on --help.
	asks := []string{"--help=all", "--help"}
	if !b.vllm() {
		asks = []string{"--help"}
	}
	var opts map[string]bool
	var ask string
	var lastErr error
	var lastOut []byte
	for _, a := range asks {
		out, err := h.Exec(ctx, path, append(append([]string{}, prefix...), a)...)
		if o := helpOptions(out); err == nil && len(o) > 0 {
			opts, ask = o, a
			break
		}
		lastErr, lastOut = err, out
	}
	cmdline := strings.Join(append([]string{path}, prefix...), " ")
	if opts == nil {
		if lastErr == nil {
			lastErr = fmt.Errorf("it lists no option")
		}
		r.Found = fmt.Sprintf("%s %s failed (%v): %s", cmdline, strings.Join(asks, " and "), lastErr, lastLine(lastOut))
		r.Fix = "repair this install, or point --vllm-bin at one that works"
		return r
	}
	var passed, missing []string
	seen := map[string]bool{}
	for _, s := range b.specs {
		for _, f := range passedFlags(s.Args, b.vllm()) {
			if seen[f] {
				continue
			}
			seen[f] = true
			passed = append(passed, f)
			if !known(f, opts) {
				missing = append(missing, f)
			}
		}
	}
	if len(missing) == 0 {
		r.OK = true
		r.Found = fmt.Sprintf("%s %s lists all %d options the run passes", cmdline, ask, len(passed))
		return r
	}
	var named []string
	added, own := false, false
	for _, f := range missing {
		if b.extra[f] {
			named = append(named, f+" (from --engine-arg or the arm)")
			added = true
		} else {
			named = append(named, f)
			own = true
		}
	}
	r.Found = fmt.Sprintf("%s %s does not list %s, which the run passes", cmdline, ask, strings.Join(named, ", "))
	switch {
	case own && b.vllm() && slices.Contains(missing, "--data-parallel-size"):
		r.Fix = "use a vLLM build that serves data parallelism (--data-parallel-size, with P2P ports per rank since vLLM #47636), or drop --source-dp"
	case own && b.vllm():
		r.Fix = "use a vLLM build that has them: p2pfault starts every engine as tests/v1/kv_offload/tiering/p2p/run_accuracy_test.sh does, plus --enable-prompt-tokens-details"
	case own:
		r.Fix = "rebuild p2pfault: its simulated engine must know every flag of its own launch"
	}
	if added {
		if r.Fix != "" {
			r.Fix += "; "
		}
		r.Fix += "drop or correct the --engine-arg that passes it"
	}
	return r
}

// serveArgs is argv up to and including "serve" (["serve"] for vllm,
// ["sim", "serve"] for the simulated engine).
func serveArgs(args []string) []string {
	i := slices.Index(args, "serve")
	if i < 0 {
		return []string{"serve"}
	}
	return args[:i+1]
}

// passedFlags lists the options argv passes after `serve MODEL`, each
// once, in order, named as the engine's parser looks them up.
func passedFlags(args []string, vllm bool) []string {
	i := slices.Index(args, "serve")
	if i < 0 {
		return nil
	}
	rest := args[i+1:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		rest = rest[1:] // the model
	}
	var out []string
	seen := map[string]bool{}
	for _, a := range rest {
		if a == "--" {
			break
		}
		if !isOption(a) {
			continue
		}
		if n := optionName(a, vllm); !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// isOption tells an option ("--port", "-tp") from a value ("8100",
// "-1", a JSON object).
func isOption(a string) bool {
	letter := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	switch {
	case len(a) < 2 || a[0] != '-':
		return false
	case a[1] == '-':
		return len(a) > 2 && letter(a[2])
	}
	return letter(a[1])
}

// optionName is the option a word sets: "--port=8100" sets --port. vLLM's
// FlexibleArgumentParser also reads underscores as dashes before the
// first '.', and --json-arg.key as one key of --json-arg.
func optionName(a string, vllm bool) string {
	name, _, _ := strings.Cut(a, "=")
	if vllm && strings.HasPrefix(name, "--") {
		base, _, _ := strings.Cut(name[2:], ".")
		name = "--" + strings.ReplaceAll(base, "_", "-")
	}
	return name
}

// known reports whether a help listing holds the option; a short option
// with its value attached ("-O3") counts as its two-letter self.
func known(name string, opts map[string]bool) bool {
	if opts[name] {
		return true
	}
	return !strings.HasPrefix(name, "--") && len(name) > 2 && opts[name[:2]]
}

// helpOptions reads the option names of a help text, argparse's ("  -tp
// N, --tensor-parallel-size N") or pflag's ("  -h, --help   help"): each
// line that starts with an option, its comma-separated names until the
// description begins.
func helpOptions(out []byte) map[string]bool {
	opts := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "-") {
			continue
		}
		for _, part := range strings.Split(t, ", ") {
			f := strings.Fields(part)
			if len(f) == 0 || !isOption(f[0]) {
				break
			}
			name, _, _ := strings.Cut(f[0], "=")
			opts[name] = true
			if len(f) > 2 { // the description began: what follows is prose
				break
			}
		}
	}
	return opts
}

// revision names the commit p2pfault was built from, when Go recorded it.
func revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += ", modified"
	}
	return ", built from " + rev
}
