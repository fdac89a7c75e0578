package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"p2pfault/console"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/fault"
	"p2pfault/runfolder"
	"p2pfault/runner"
	"p2pfault/sim"
)

// armSpec is one arm of a run: its name and, with --engine vllm, its build.
type armSpec struct{ name, bin string }

// armSpecs reads --arm and --arms: simulated arms by name (sim.Arms),
// vLLM arms as NAME=VLLM_BIN (or a bare NAME, a label for --vllm-bin).
func (o *runOptions) armSpecs() ([]armSpec, error) {
	var specs []armSpec
	vllm := o.flags.engine == runner.EngineVLLM
	switch {
	case len(o.arms) > 0 && len(o.arm) > 0:
		return nil, exitcode.Usagef("--arm and --arms both given: name the arms with one of them")
	case len(o.arms) > 0 && vllm:
		return nil, exitcode.Usagef("--arms names the simulated engine's arms; with --engine vllm give --arm NAME=VLLM_BIN per build")
	case len(o.arms) > 0:
		for _, a := range o.arms {
			specs = append(specs, armSpec{name: a})
		}
	case len(o.arm) == 0:
		specs = []armSpec{{name: "main"}}
	default:
		for _, a := range o.arm {
			name, bin, hasBin := strings.Cut(a, "=")
			switch {
			case hasBin && !vllm:
				return nil, exitcode.Usagef("--arm %q: NAME=VLLM_BIN is for --engine vllm; the simulated engine's arms are %s", a, sim.ArmNames())
			case hasBin && (name == "" || bin == ""):
				return nil, exitcode.Usagef("--arm %q: want NAME=VLLM_BIN", a)
			case name == "":
				return nil, exitcode.Usagef("--arm %q: empty arm name", a)
			}
			specs = append(specs, armSpec{name: name, bin: bin})
		}
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.name] {
			return nil, exitcode.Usagef("arm %q given twice", s.name)
		}
		seen[s.name] = true
		if strings.Contains(s.name, "/") {
			return nil, exitcode.Usagef("arm %q: an arm name cannot hold '/'", s.name)
		}
	}
	return specs, nil
}

// armNames are the arms' names, in order.
func armNames(specs []armSpec) []string {
	var names []string
	for _, s := range specs {
		names = append(names, s.name)
	}
	return names
}

// runArms are the arms' configurations and output folders, in order.
type runArms struct {
	configs []experiment.Config
	dirs    []string
}

// armConfigs configures one experiment per arm. One arm writes into out
// itself, as run always did; several write each into its row folder
// (runfolder.Row: out/ARM-CASE or out/ARM-MODE-CASE, as a slice's rows) and take free ports from one pool, and with --engine vllm
// split --gpus into one contiguous share per arm. Each arm launches its
// own engines; with --attach the one arm's cluster is opened later (its
// Cluster is left nil here).
func (o *runOptions) armConfigs(cmd *cobra.Command, specs []armSpec, caseName, out string, headless bool) (runArms, error) {
	fs := cmd.Flags()
	n := len(specs)
	if n > 1 {
		for _, f := range []string{"source-port", "decoder-port", "p2p-port"} {
			if fs.Changed(f) {
				return runArms{}, exitcode.Usagef("--%s fixes one cluster's ports, and %d arms run %d clusters at once: leave the ports free", f, n, n)
			}
		}
		if o.flags.engine == runner.EngineVLLM && len(o.flags.gpus) > 0 && len(o.flags.gpus) < n {
			return runArms{}, exitcode.Usagef("--gpus %s: %d GPU(s) for %d arms; each arm's cluster needs at least one", strings.Join(o.flags.gpus, ","), len(o.flags.gpus), n)
		}
	}
	pool := runner.NewPortPool()
	var ra runArms
	for k, s := range specs {
		dir := out
		if n > 1 {
			dir = runfolder.Row(out, s.name, o.flags.mode, caseName)
		}
		cfg, err := o.flags.experimentConfig(s.name, caseName, dir)
		if err != nil {
			return runArms{}, err
		}
		if o.flags.kube.on {
			if cfg.Cluster, err = o.flags.kube.opener(o.flags.model); err != nil {
				return runArms{}, err
			}
		} else if o.flags.attach == "" {
			if cfg.Cluster, err = o.launch(fs, s, k, n, pool); err != nil {
				return runArms{}, err
			}
		}
		cfg.Timeline = o.timeline
		cfg.Duration = o.duration
		if cfg.Duration == 0 && headless && caseName == fault.CaseNone && o.timeline == "" {
			cfg.Duration = experiment.DefaultNoneDuration
		}
		ra.configs = append(ra.configs, cfg)
		ra.dirs = append(ra.dirs, dir)
	}
	return ra, nil
}

// launch is the cluster arm k of n launches: its build (--arm
// NAME=VLLM_BIN), its engines' flag for the simulated arm, and with
// several arms free ports from one pool and its share of --gpus.
func (o *runOptions) launch(fs *pflag.FlagSet, s armSpec, k, n int, pool *runner.PortPool) (experiment.Opener, error) {
	rc, err := o.flags.launchConfig(fs, s.name, s.bin)
	if err != nil {
		return nil, err
	}
	if n > 1 {
		rc.FreePorts = true
		rc.PortPool = pool
		if g := o.flags.gpus; len(g) > 0 {
			rc.GPUs = g[k*len(g)/n : (k+1)*len(g)/n]
		}
	}
	return o.flags.opener(rc), nil
}

// armOnly forwards the events of one arm (a filter over the merged
// stream) until it closes.
func armOnly(in <-chan event.Event, arm string) <-chan event.Event {
	out := make(chan event.Event, 4096)
	go func() {
		defer close(out)
		for ev := range in {
			if ev.Arm == arm {
				out <- ev
			}
		}
	}()
	return out
}

// startConsoles prints the merged stream headless: one printer per arm,
// its lines prefixed "ARM/CASE" when there are several (as a slice's);
// caseName is "pd/CASE" for a run of mode pd.
func startConsoles(wg *sync.WaitGroup, ch <-chan event.Event, stdout io.Writer, specs []armSpec, caseName string) {
	if len(specs) == 1 {
		wg.Go(func() { console.New(stdout, "").Run(ch) })
		return
	}
	w := &lockedWriter{w: stdout}
	width := 0
	for _, s := range specs {
		width = max(width, len(s.name)+1+len(caseName))
	}
	outs := map[string]chan event.Event{}
	for _, s := range specs {
		c := make(chan event.Event, 4096)
		outs[s.name] = c
		p := console.New(w, fmt.Sprintf("%-*s ", width, s.name+"/"+caseName))
		wg.Go(func() { p.Run(c) })
	}
	wg.Go(func() {
		for ev := range ch {
			if c, ok := outs[ev.Arm]; ok {
				c <- ev
			}
		}
		for _, c := range outs {
			close(c)
		}
	})
}

// armError names the arm an error of a several-arm run came from; its
// exit code is the error's.
type armError struct {
	arm string
	err error
}

func (e armError) Error() string { return "arm " + e.arm + ": " + e.err.Error() }
func (e armError) Unwrap() error { return e.err }
