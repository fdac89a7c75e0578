package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"p2pfault/check"
	"p2pfault/console"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/exporter"
	"p2pfault/fault"
	"p2pfault/report"
	"p2pfault/runfolder"
	"p2pfault/runner"
	"p2pfault/sim"
)

type sliceOptions struct {
	flags    clusterFlags
	arms     []string
	vllmArms []string
	cases    []string
	modes    []string // --modes; else --mode's one
	parallel int
	quiet    bool
	compare  bool     // --compare-seed
	sweeps   []string // --sweep NAME=V1,V2,... (sweep.go)
	metrics  metricsFlag
}

func newSliceCommand() (*cobra.Command, *sliceOptions) {
	o := &sliceOptions{}
	cmd := &cobra.Command{
		Use:   "slice",
		Short: "Run the seed's three fault cases for each arm, headless, and print its table",
		Long: "Run " + seedCasesProse() + " on source-0 for every arm, check the bounds and print\n" +
			"the seed's table. With the simulated engine the arms are the builds it stands for\n" +
			"(" + sim.ArmNames() + "; the default main,fixed are the seed's: main waits on a pending\n" +
			"handshake, fixed is main + PR #64501) and all rows run at once on separate ports; with\n" +
			"--engine vllm each --arm NAME=VLLM_BIN is a build, and\n" +
			"rows run one after another. --modes p2p,pd adds each arm's rows in PD mode (a prefill\n" +
			"leg, then a decode leg naming the source). Exit 1 when a row failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSlice(cmd, o) },
	}
	fs := cmd.Flags()
	o.flags.register(fs)
	fs.StringSliceVar(&o.arms, "arms", []string{"main", "fixed"}, "arms of the simulated engine: "+sim.ArmNames())
	fs.StringArrayVar(&o.vllmArms, "arm", nil, "with --engine vllm: an arm NAME=VLLM_BIN (repeatable), e.g. --arm main=/opt/vllm-main/bin/vllm")
	fs.StringSliceVar(&o.cases, "cases", fault.SeedCases(), "cases to run: "+strings.Join(fault.Cases(), ", "))
	fs.StringSliceVar(&o.modes, "modes", nil, "modes to run, each a set of rows: p2p, pd (default --mode's)")
	fs.IntVar(&o.parallel, "parallel", 0, "rows run at once (default: all with the simulated engine, 1 with vllm)")
	fs.BoolVar(&o.quiet, "quiet", false, "print only phases, faults and the table, not a summary line per second")
	fs.BoolVar(&o.compare, "compare-seed", false, "also print the seed's table beside the run's, cell by cell with the difference and its tolerance (written to compare-seed.txt too)")
	fs.StringArrayVar(&o.sweeps, "sweep", nil, "run every row once per value of an engine setting, NAME=V1,V2,... (repeatable: every combination): VLLM_P2P_HANDSHAKE_TIMEOUT_S, kv_load_failure_policy, unbound_store_timeout_s, and with the simulated engine its timeouts (sim-lookup-timeout, sim-heartbeat-timeout, sim-load-timeout, ...)")
	o.metrics.register(fs)
	return cmd, o
}

// sliceRow is one arm × mode × case, and with --sweep one combination
// of the swept settings' values.
type sliceRow struct {
	arm, mode, caseName, vllmBin string
	out                          string
	point                        sweepPoint
}

// label names the row in progress lines and errors: "arm/case", or
// "arm/mode/case" outside mode p2p, then its swept settings.
func (r sliceRow) label() string {
	l := runfolder.RowLabel(r.arm, r.mode, r.caseName)
	if len(r.point.settings) > 0 {
		l += " " + event.SettingsText(r.point.settings, " ")
	}
	return l
}

// slicePlan is a slice as its flags describe it: its rows, how many run
// at once and one experiment configuration per row (without the attached
// cluster, which is opened per row); nothing opened, started or made yet.
type slicePlan struct {
	rows     []sliceRow
	parallel int
	configs  []experiment.Config
}

// configure reads and checks the slice's flags (exit 2 on any problem,
// naming it): the first half of runSlice, shared with doctor so that
// doctor checks exactly the rows these flags run.
func (o *sliceOptions) configure(cmd *cobra.Command) (slicePlan, error) {
	if err := o.kube(cmd); err != nil {
		return slicePlan{}, err
	}
	if len(o.sweeps) > 0 && o.flags.attach != "" {
		return slicePlan{}, exitcode.Usagef("--sweep sets the engines p2pfault starts; with --attach the engines are yours: set them and run a slice per value")
	}
	if len(o.sweeps) > 0 && cmd.Flags().Changed("metrics-listen") {
		// Its series are labelled by arm, mode and case, which the rows of
		// one sweep share.
		return slicePlan{}, exitcode.Usagef("--metrics-listen with --sweep: the series are labelled by arm, mode and case, which a sweep's rows share; run without one of them")
	}
	if o.flags.attach != "" {
		if err := o.attachSlice(cmd); err != nil {
			return slicePlan{}, err
		}
	}
	modes, err := o.rowModes(cmd)
	if err != nil {
		return slicePlan{}, err
	}
	if _, err := o.metrics.check(cmd.Flags()); err != nil {
		return slicePlan{}, err
	}
	axes, err := parseSweeps(o.sweeps, o.flags.engine, cmd.Flags())
	if err != nil {
		return slicePlan{}, err
	}
	if err := o.flags.checkTimeScale(); err != nil {
		return slicePlan{}, err
	}
	if err := checkSweepScaled(axes, o.flags.engine, o.flags.timeScale); err != nil {
		return slicePlan{}, err
	}
	rows, err := o.plan(modes, sweepPoints(axes))
	if err != nil {
		return slicePlan{}, err
	}
	parallel, err := o.parallelRows(cmd, len(rows))
	if err != nil {
		return slicePlan{}, err
	}
	configs, err := o.rowConfigs(cmd, rows, parallel)
	if err != nil {
		return slicePlan{}, err
	}
	return slicePlan{rows: rows, parallel: parallel, configs: configs}, nil
}

func runSlice(cmd *cobra.Command, o *sliceOptions) error {
	start := time.Now()
	given := o.flags.out != "" // configure fills in the default
	p, err := o.configure(cmd)
	if err != nil {
		return err
	}
	// Claimed before anything opens it: no other run shares the folder.
	claim, err := claimSlice(o.flags.out, given, &p)
	if err != nil {
		return err
	}
	defer claim.Done()
	rows, parallel := p.rows, p.parallel
	out := claim.Dir
	exps, err := o.experiments(cmd, p)
	if err != nil {
		return err
	}
	// Every row's configuration is checked before any folder is made, so a
	// usage error leaves nothing behind.
	metrics, err := o.metrics.start(cmd.Flags(), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer metrics.Finish(cmd.Context(), cmd.ErrOrStderr()) // after the reports, as run's
	if err := makeRowFolders(out, rows, cmd, claim); err != nil {
		return err
	}
	// A row's events log that cannot be written stops every row: they
	// write to the same disk. So does a closed stdout or stderr.
	ctx, stop := context.WithCancelCause(cmd.Context())
	defer stop(nil)
	watchOutput(cmd, stop)
	stdout := &lockedWriter{w: cmd.OutOrStdout()}
	errs := runRows(ctx, stop, exps, rows, parallel, stdout, o.quiet, metrics)
	runs, firstErr := rebuildRows(rows, errs)
	if len(runs) > 0 {
		var compare func([]report.Row) error
		if o.compare {
			compare = func(table []report.Row) error {
				return printCompareSeed(stdout, out, table, o.flags.timeScale, o.flags.interval)
			}
		}
		outcome, err := printSlice(stdout, out, runs, time.Since(start), o.flags.timeScale, compare)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if firstErr == nil && outcome != nil {
			return outcome
		}
	}
	for _, err := range errs {
		if errors.Is(err, exitcode.ErrInterrupted) {
			return interruption(ctx) // naming the signal or the closed output
		}
	}
	return firstErr
}

// parallelRows is how many rows run at once: --parallel, or all of them
// with the simulated engine and one with vllm. Fixed ports allow one.
func (o *sliceOptions) parallelRows(cmd *cobra.Command, rows int) (int, error) {
	parallel := o.parallel
	if parallel <= 0 {
		parallel = rows
		if o.flags.engine == runner.EngineVLLM {
			parallel = 1
		}
	}
	fs := cmd.Flags()
	fixedPorts := fs.Changed("source-port") || fs.Changed("decoder-port") || fs.Changed("p2p-port")
	if fixedPorts && parallel > 1 {
		return 0, exitcode.Usagef("--source-port/--decoder-port/--p2p-port fix the ports of every row, so rows cannot run at once: add --parallel 1")
	}
	return parallel, nil
}

// rowConfigs configures one experiment per row: the engines each launches,
// or with --attach no cluster yet (experiments opens one per row).
func (o *sliceOptions) rowConfigs(cmd *cobra.Command, rows []sliceRow, parallel int) ([]experiment.Config, error) {
	fs := cmd.Flags()
	cfgs := make([]experiment.Config, len(rows))
	pool := runner.NewPortPool() // rows running at once never pick the same port
	for i, r := range rows {
		cfg, err := o.flags.experimentConfig(r.arm, r.caseName, r.out)
		if err != nil {
			return nil, err
		}
		cfg.Mode = r.mode
		cfg.Settings = r.point.settings
		if o.flags.kube.on {
			if cfg.Cluster, err = o.flags.kube.opener(o.flags.model); err != nil {
				return nil, err
			}
		} else if o.flags.attach == "" {
			rc, err := o.flags.launchConfig(fs, r.arm, r.vllmBin)
			if err != nil {
				return nil, err
			}
			r.point.apply(&rc)
			// Rows running at once take free ports rather than racing for
			// the script's defaults.
			rc.FreePorts = rc.FreePorts || parallel > 1
			rc.PortPool = pool
			cfg.Cluster = o.flags.opener(rc)
		}
		cfgs[i] = cfg
	}
	return cfgs, nil
}

// experiments makes the slice's experiments, one per row.
func (o *sliceOptions) experiments(cmd *cobra.Command, p slicePlan) ([]*experiment.Experiment, error) {
	exps := make([]*experiment.Experiment, len(p.rows))
	for i, r := range p.rows {
		cfg := p.configs[i]
		if o.flags.attach != "" {
			// One attached cluster per row: its stall record and the logs
			// of engines it restarts go to the row's folder.
			cl, err := openAttach(cmd.Context(), o.flags.attach, r.out, o.flags.givenDecoders(cmd.Flags()))
			if err != nil {
				return nil, err
			}
			cfg.Cluster = cl
		}
		var err error
		if exps[i], err = experiment.New(cfg); err != nil {
			return nil, err
		}
	}
	return exps, nil
}

// makeRowFolders makes the slice's folder (warning about leftovers) and
// one per row, each locked for the slice (a row is a run folder of its own
// that another run could be given as --out).
func makeRowFolders(out string, rows []sliceRow, cmd *cobra.Command, claim *runfolder.Claim) error {
	if err := prepareOut(out, cmd.ErrOrStderr()); err != nil {
		return err
	}
	for _, r := range rows {
		if err := claim.Lock(r.out); err != nil {
			return exitcode.AsUsage(err)
		}
		if err := refuseLinksIn(r.out); err != nil {
			return err
		}
	}
	return refuseLinksIn(out)
}

// runRows runs the rows, parallel at a time, and returns each row's error.
func runRows(ctx context.Context, stop context.CancelCauseFunc, exps []*experiment.Experiment, rows []sliceRow, parallel int, stdout *lockedWriter, quiet bool, metrics *exporter.Server) []error {
	errs := make([]error, len(rows))
	sem := make(chan struct{}, parallel)
	width := 12 // "fixed/remove" and a space: the seed's slice lines up
	for _, r := range rows {
		width = max(width, len(r.label()))
	}
	var wg sync.WaitGroup
	for i, r := range rows {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = exitcode.ErrInterrupted
				if c := context.Cause(ctx); !errors.Is(c, context.Canceled) {
					errs[i] = c // another row's log failed
				}
				return
			}
			defer func() { <-sem }()
			errs[i] = runRow(ctx, stop, exps[i], r, width, stdout, quiet, metrics)
		})
	}
	wg.Wait()
	return errs
}

// rebuildRows reads each row's events back into its run; the error is the
// first row's failure, named arm/case.
func rebuildRows(rows []sliceRow, errs []error) ([]report.Run, error) {
	var runs []report.Run
	var firstErr error
	for i, r := range rows {
		if errs[i] != nil && firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", r.label(), errs[i])
			if errors.As(errs[i], new(logFailure)) {
				firstErr = errs[i] // it names its file, which may be another row's
			}
		}
		run, err := report.Rebuild(runfolder.EventsFile(r.out, false), r.out)
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", r.label(), err)
			}
			continue
		}
		runs = append(runs, run)
	}
	return runs, firstErr
}

// printSlice writes the slice's reports and prints its table; outcome is
// the rows' verdicts' exit (check.Outcome: nil when every row held its
// bounds, a failed bound before a window not judged).
// compare, when set, prints more under the failures (--compare-seed).
func printSlice(stdout *lockedWriter, out string, runs []report.Run, wall time.Duration, scale float64, compare func([]report.Row) error) (outcome error, err error) {
	err = report.WriteAll(out, runs)
	var table []report.Row
	verdicts := make([]event.Verdict, 0, len(runs))
	for _, r := range runs {
		table = append(table, r.Row())
		verdicts = append(verdicts, r.Verdict)
	}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, report.Tables(table)+windowsText(table))
	printFailures(stdout, runs)
	if compare != nil {
		if cerr := compare(table); cerr != nil && err == nil {
			err = cerr
		}
	}
	fmt.Fprintf(stdout, "slice: %d rows in %.1fs wall time, time scale %g; reports: %s\n",
		len(runs), wall.Seconds(), scale, out)
	return check.Outcome(verdicts...), err
}

// rowModes are the modes whose rows the slice runs: --modes, or --mode's
// one; with --attach and neither given, the file's mode if it says one.
func (o *sliceOptions) rowModes(cmd *cobra.Command) ([]string, error) {
	fs := cmd.Flags()
	if fs.Changed("modes") && fs.Changed("mode") {
		return nil, exitcode.Usagef("--mode and --modes both given: name the modes with one of them")
	}
	modes := []string{o.flags.mode}
	switch {
	case fs.Changed("modes"):
		modes = o.modes
	case !fs.Changed("mode") && o.flags.attach != "":
		m, err := attachMode(o.flags.attach)
		if err != nil {
			return nil, err
		}
		if m != "" {
			modes = []string{m}
		}
	}
	seen := map[string]bool{}
	for _, m := range modes {
		if err := checkMode("--modes", m); err != nil {
			return nil, err
		}
		if seen[m] {
			return nil, exitcode.Usagef("--modes: %q given twice", m)
		}
		seen[m] = true
	}
	if len(modes) == 0 {
		return nil, exitcode.Usagef("--modes: give at least one mode (%s, %s)", event.ModeP2P, event.ModePD)
	}
	return modes, nil
}

// plan lists the rows: arms in the order given, then modes in the order
// given, then cases in the seed's order, then the sweep's points.
func (o *sliceOptions) plan(modes []string, points []sweepPoint) ([]sliceRow, error) {
	for _, c := range o.cases {
		if _, ok := fault.CaseKind(c); !ok {
			return nil, exitcode.Usagef("--cases: %q is not a fault case (%s)", c, strings.Join(fault.Cases(), ", "))
		}
	}
	type arm struct{ name, bin string }
	var arms []arm
	if o.flags.engine == runner.EngineVLLM {
		if len(o.vllmArms) == 0 {
			arms = append(arms, arm{"main", o.flags.vllmBin})
		}
		for _, a := range o.vllmArms {
			name, bin, ok := strings.Cut(a, "=")
			if !ok || name == "" || bin == "" {
				return nil, exitcode.Usagef("--arm %q: want NAME=VLLM_BIN", a)
			}
			arms = append(arms, arm{name, bin})
		}
	} else {
		if len(o.vllmArms) > 0 {
			return nil, exitcode.Usagef("--arm NAME=VLLM_BIN is for --engine vllm; the simulated engine's arms are set with --arms (%s)", sim.ArmNames())
		}
		for _, a := range o.arms {
			if _, err := armArgs(runner.EngineSim, a); err != nil && o.flags.attach == "" {
				return nil, err
			}
			arms = append(arms, arm{name: a})
		}
	}
	if len(arms) == 0 || len(o.cases) == 0 {
		return nil, exitcode.Usagef("nothing to run: give at least one arm and one case")
	}
	out := o.flags.out
	if out == "" {
		out = runfolder.Default("slice", time.Now())
		o.flags.out = out
	}
	var rows []sliceRow
	seen := map[string]bool{}
	for _, a := range arms {
		if seen[a.name] {
			return nil, exitcode.Usagef("arm %q given twice", a.name)
		}
		seen[a.name] = true
		for _, m := range modes {
			for _, c := range o.cases {
				for _, p := range points {
					rows = append(rows, sliceRow{arm: a.name, mode: m, caseName: c, vllmBin: a.bin, point: p,
						out: runfolder.SweptRow(out, a.name, m, c, p.settings)})
				}
			}
		}
	}
	return rows, nil
}

// runRow runs one row with its event log and a prefixed progress printer.
func runRow(ctx context.Context, stop context.CancelCauseFunc, exp *experiment.Experiment, r sliceRow, width int, stdout *lockedWriter, quiet bool, metrics *exporter.Server) error {
	var faces sync.WaitGroup
	logErr := writeEvents(&faces, exp.Subscribe(), runfolder.EventsFile(r.out, false), report.CompressNone, stop)
	metrics.Feed(&faces, exp.Subscribe)
	ch := exp.Subscribe()
	p := console.New(stdout, fmt.Sprintf("%-*s ", width, r.label()))
	p.Summaries = !quiet
	faces.Go(func() { p.Run(ch) })
	_, err := exp.Run(ctx)
	faces.Wait()
	if lerr := <-logErr; lerr != nil && err == nil {
		err = lerr
	}
	return err
}

// lockedWriter keeps lines of rows running at once from interleaving.
type lockedWriter struct {
	mu sync.Mutex
	w  interface{ Write([]byte) (int, error) }
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
