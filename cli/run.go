package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"p2pfault/check"
	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/exporter"
	"p2pfault/fault"
	"p2pfault/report"
	"p2pfault/runfolder"
	"p2pfault/runner"
	"p2pfault/sim"
	"p2pfault/ui"
)

type runOptions struct {
	flags    clusterFlags
	caseName string
	arm      []string // --arm: sim arm names, or NAME=VLLM_BIN with vllm
	arms     []string // --arms: sim arm names
	headless bool
	duration time.Duration
	timeline string
	nemesis  nemesisFlags
	compress string // --events-compress
	metrics  metricsFlag
}

func newRunCommand() (*cobra.Command, *runOptions) {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one case: the dashboard on a terminal, headless otherwise",
		Long: "Start the cluster, warm it up, pull from every source through the decoder and fire\n" +
			"the case's fault on source-0 (" + strings.Join(fault.Cases(), ", ") + "; none = only the keys'\n" +
			"faults).\n" +
			"On a terminal this opens the dashboard; with --headless or when stdout is not a\n" +
			"terminal it prints progress and the verdict table. Reports go to --out.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRun(cmd, o) },
	}
	fs := cmd.Flags()
	o.flags.register(fs)
	fs.StringVar(&o.caseName, "case", "", "fault case: "+fault.CaseList()+" (default $FAULT_CASE, else none)")
	fs.StringArrayVar(&o.arm, "arm", nil, "arm (repeatable): a simulated arm ("+sim.ArmNames()+"; main waits on a pending handshake, fixed prefills locally, vLLM PR #64501); with --engine vllm NAME=VLLM_BIN, one cluster per build (default main)")
	fs.StringSliceVar(&o.arms, "arms", nil, "simulated arms run side by side, one cluster each, e.g. main,fixed (the arms: "+sim.ArmNames()+")")
	fs.BoolVar(&o.headless, "headless", false, "no dashboard: print progress and the verdict table")
	fs.DurationVar(&o.duration, "duration", 0, "case none or --nemesis: length of the measured run (headless default 30s for none; the dashboard runs until q)")
	fs.StringVar(&o.timeline, "timeline", "", "scripted timeline replacing the case's preset, e.g. \"at 10s stall source-0 for 30s; at 50s kill source-1\"")
	o.nemesis.register(fs)
	fs.StringVar(&o.compress, "events-compress", "none", "write the events compressed as they come: zstd (events.jsonl.zst, for long runs) or none (events.jsonl); report reads either")
	o.metrics.register(fs)
	return cmd, o
}

// The experiment is what the dashboard drives: one arm or several.
var (
	_ ui.Controller    = (*experiment.Experiment)(nil)
	_ ui.ArmController = (*experiment.Group)(nil)
)

// errQuit is how the dashboard's q ends a run: the planned end of a run
// until q (case none without --duration), else an interruption (exit 130,
// and the end event says so: the reports read INTERRUPTED).
var errQuit = &exitcode.Error{Code: exitcode.Interrupted, Err: errors.New("quit from the dashboard")}

// runPlan is a run as its flags describe it: checked, with one
// experiment configuration per arm; nothing opened, started or made yet.
type runPlan struct {
	caseName string
	specs    []armSpec
	out      string
	headless bool
	arms     runArms
	compress report.Compression // of the events file (its name too: Compression.Path)
}

// configure reads and checks run's flags and environment (exit 2 on any
// problem, naming it): the first half of runRun, shared with doctor so
// that doctor checks exactly the run these flags start.
func (o *runOptions) configure(cmd *cobra.Command) (runPlan, error) {
	if o.duration < 0 || o.duration == 0 && cmd.Flags().Changed("duration") {
		return runPlan{}, exitcode.Usagef("--duration %v: want a positive duration (leave it out for the default: %v headless for case none, until q on the dashboard)",
			o.duration, experiment.DefaultNoneDuration)
	}
	comp, err := report.ParseCompression(o.compress)
	if err != nil {
		return runPlan{}, exitcode.Usagef("--events-compress %q: %w", o.compress, err)
	}
	if _, err := o.metrics.check(cmd.Flags()); err != nil {
		return runPlan{}, err
	}
	nemesis, err := o.nemesis.build(cmd.Flags(), o.flags.restart, o.duration)
	if err != nil {
		return runPlan{}, err
	}
	if err := o.checkScaled(nemesis != nil); err != nil {
		return runPlan{}, err
	}
	caseName, err := o.caseOf(cmd, nemesis != nil)
	if err != nil {
		return runPlan{}, err
	}
	if err := o.durationFits(cmd, caseName); err != nil {
		return runPlan{}, err
	}
	if err := o.clusterFrom(cmd); err != nil {
		return runPlan{}, err
	}
	if line := o.flags.applyPreset(cmd.Flags(), caseName); line != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), line)
	}
	specs, err := o.armSpecs()
	if err != nil {
		return runPlan{}, err
	}
	if o.flags.kube.on && len(specs) > 1 {
		return runPlan{}, exitcode.Usagef("--kube: the pods the selectors find are one cluster, so it runs one arm, not %d", len(specs))
	}
	if o.flags.attach != "" && len(specs) > 1 {
		return runPlan{}, exitcode.Usagef("--attach: an attach file describes one cluster, so it runs one arm, not %d", len(specs))
	}
	headless := o.headless || !isTerminal(cmd.OutOrStdout())
	out := o.flags.out
	if out == "" {
		out = runfolder.Default(runfolder.RunName(armNames(specs), o.flags.mode, caseName), time.Now())
	}
	arms, err := o.armConfigs(cmd, specs, caseName, out, headless)
	if err != nil {
		return runPlan{}, err
	}
	for i := range arms.configs {
		arms.configs[i].Nemesis = nemesis // every arm draws the same schedule
	}
	return runPlan{caseName: caseName, specs: specs, out: out, headless: headless, arms: arms, compress: comp}, nil
}

// durationFits refuses --duration where it has no say: a case's or a
// timeline's run ends at its last window's recovery, which --recovery
// lengthens (taken silently, a 10-minute run stopped after a minute).
func (o *runOptions) durationFits(cmd *cobra.Command, caseName string) error {
	if !cmd.Flags().Changed("duration") || caseName == fault.CaseNemesis {
		return nil
	}
	if o.timeline != "" || caseName != fault.CaseNone {
		return exitcode.Usagef("--duration %v: a run with a case or a timeline ends at its last fault window's recovery; lengthen it with --recovery (--duration is for case none and --nemesis)", o.duration)
	}
	return nil
}

// caseOf is the run's case: --case, else $FAULT_CASE, else none; a
// nemesis run's is nemesis (its own faults: $FAULT_CASE has no say).
func (o *runOptions) caseOf(cmd *cobra.Command, nemesis bool) (string, error) {
	caseName := o.caseName
	if !cmd.Flags().Changed("case") {
		caseName = os.Getenv("FAULT_CASE")
	}
	if caseName == "" {
		caseName = fault.CaseNone
	}
	if nemesis {
		return fault.CaseNemesis, nil
	}
	if _, ok := fault.CaseKind(caseName); !ok && caseName != fault.CaseNone {
		what := "--case"
		if !cmd.Flags().Changed("case") {
			what = "FAULT_CASE"
		}
		return "", exitcode.Usagef("%s %q: want %s", what, caseName, fault.CaseList())
	}
	return caseName, nil
}

// clusterFrom checks where the cluster comes from (--kube, or an attach
// file, whose kubernetes: block is --kube) and takes an attach file's
// mode: unless --mode is given.
func (o *runOptions) clusterFrom(cmd *cobra.Command) error {
	if err := o.flags.kubeFromAttach(cmd.Flags()); err != nil {
		return err
	}
	if err := o.flags.kube.check(cmd.Flags(), o.flags.attach); err != nil {
		return err
	}
	if o.flags.attach == "" {
		return nil
	}
	if err := refuseWithAttach(cmd.Flags()); err != nil {
		return err
	}
	if cmd.Flags().Changed("mode") {
		return nil
	}
	m, err := attachMode(o.flags.attach)
	if err != nil {
		return err
	}
	if m != "" {
		o.flags.mode = m
	}
	return nil
}

// checkScaled checks run's own scaled durations: --duration and, for a
// nemesis, its gaps and lengths (the schedule it draws from them is
// scaled as a whole).
func (o *runOptions) checkScaled(nemesis bool) error {
	if err := o.flags.checkTimeScale(); err != nil {
		return err
	}
	flags := []durationFlag{{"duration", o.duration}}
	if nemesis {
		n := o.nemesis
		flags = append(flags, durationFlag{"nemesis-gap", n.gap}, durationFlag{"nemesis-gap-spread", n.gapSpread},
			durationFlag{"nemesis-length", n.length}, durationFlag{"nemesis-length-spread", n.lengthSpread})
	}
	return checkScaled(o.flags.timeScale, flags...)
}

func runRun(cmd *cobra.Command, o *runOptions) error {
	p, err := o.configure(cmd)
	if err != nil {
		return err
	}
	// Claimed before anything opens it: no other run shares the folder.
	claim, err := claimRun(&p, o.flags.out != "")
	if err != nil {
		return err
	}
	defer claim.Done()
	out, headless, arms := p.out, p.headless, p.arms
	if o.flags.attach != "" {
		cl, err := openAttach(cmd.Context(), o.flags.attach, out, o.flags.givenDecoders(cmd.Flags()))
		if err != nil {
			return err
		}
		arms.configs[0].Cluster = cl
		// The run's end already left the cluster as found; this covers a
		// way out before Run (it resumes only stalls still held).
		defer func() { _ = cl.Close(context.Background()) }()
	}
	// NewGroup checks every arm's configuration (timeline, ports, engine
	// flags) without touching the disk, so a usage error leaves no folder
	// behind.
	g, err := experiment.NewGroup(arms.configs)
	if err != nil {
		return err
	}
	// Listening before the folder is made: an address in use leaves none.
	metrics, err := o.metrics.start(cmd.Flags(), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	// After the reports: the last scrape reads the final verdict.
	defer metrics.Finish(cmd.Context(), cmd.ErrOrStderr())
	if err := prepareFolders(claim, out, arms.dirs, cmd.ErrOrStderr()); err != nil {
		return err
	}

	ctx, cancel := context.WithCancelCause(cmd.Context())
	defer cancel(nil)
	watchOutput(cmd, cancel)
	var faces sync.WaitGroup
	logErrs := startFaces(ctx, cancel, &faces, cmd, o, p, g, metrics)
	results := g.Run(ctx)
	completed := true
	for _, r := range results {
		completed = completed && r.Err == nil
	}
	if !headless && completed {
		// A scripted run ended by itself: the dashboard shows the verdict
		// until the user quits.
		<-ctx.Done()
	}
	faces.Wait()
	runErr, verdicts := runOutcome(results, g.Arms()[0].Info().Duration == 0)
	for _, lerr := range logErrs {
		if err := <-lerr; err != nil && runErr == nil {
			runErr = err
		}
	}
	// A run that could not start (a port in use, an engine that failed)
	// has no verdict to show: the error says what went wrong.
	// Nor has one whose warm-up gate stopped it (exit 3 with an error).
	printTable := headless && exitcode.Code(runErr) != exitcode.Usage && exitcode.Code(runErr) != exitcode.NotJudged
	if werr := writeReports(cmd.OutOrStdout(), out, p.compress, arms.dirs, printTable); werr != nil && runErr == nil {
		runErr = werr
	}
	if runErr != nil {
		return runErr
	}
	return check.Outcome(verdicts...)
}

// prepareFolders makes the run's folder, claims each arm's folder for
// this run and refuses folders that are links, before any file is written
// in them. A step of its own so that runRun reads as the run's order:
// configure, claim, open, run, report.
func prepareFolders(claim *runfolder.Claim, out string, dirs []string, stderr io.Writer) error {
	if err := prepareOut(out, stderr); err != nil {
		return err
	}
	for _, d := range dirs {
		if err := claim.Lock(d); err != nil {
			return exitcode.AsUsage(err)
		}
	}
	return refuseLinksIn(append([]string{out}, dirs...)...)
}

// startFaces subscribes the run's faces to g: the events files (the run's
// and, with several arms, each arm's), the metrics, and the headless
// printers or the dashboard, whose quitting cancels ctx. It returns the
// events writers' errors, each sent once its writer is done.
func startFaces(ctx context.Context, cancel context.CancelCauseFunc, faces *sync.WaitGroup, cmd *cobra.Command,
	o *runOptions, p runPlan, g *experiment.Group, metrics *exporter.Server) []<-chan error {
	logErrs := []<-chan error{writeEvents(faces, g.Subscribe(), p.compress.Path(p.out), p.compress, cancel)}
	metrics.Feed(faces, g.Subscribe)
	if len(p.specs) > 1 {
		// Each arm's folder holds its own events too, as a slice's row does.
		for i, d := range p.arms.dirs {
			logErrs = append(logErrs, writeEvents(faces, armOnly(g.Subscribe(), p.specs[i].name), p.compress.Path(d), p.compress, cancel))
		}
	}
	if p.headless {
		startConsoles(faces, g.Subscribe(), cmd.OutOrStdout(), p.specs, modeCase(o.flags.mode, p.caseName))
		return logErrs
	}
	ch := g.Subscribe()
	faces.Go(func() {
		uiErr := ui.Run(ctx, g, ch, ui.Options{})
		// Keep reading after the dashboard is gone: the experiment
		// never drops an event, so an unread channel would stall it.
		defer func() {
			for range ch {
			}
		}()
		if uiErr != nil {
			cancel(uiErr)
			return
		}
		cancel(errQuit)
	})
	return logErrs
}

// runOutcome is the run's error (the first arm's, named by its arm when
// there are several; quitting the dashboard is none for a run until q,
// untilQuit, and an interruption of any other: it was cut short) and
// every arm's verdict.
func runOutcome(results []experiment.Result, untilQuit bool) (runErr error, verdicts []event.Verdict) {
	for _, r := range results {
		err := r.Err
		if errors.Is(err, errQuit) {
			err = exitcode.ErrInterrupted
			if untilQuit {
				err = nil
			}
		}
		if err != nil && runErr == nil {
			runErr = err
			if len(results) > 1 {
				runErr = armError{arm: r.Arm, err: err}
			}
		}
		verdicts = append(verdicts, r.Verdict)
	}
	return runErr, verdicts
}

// prepareOut creates the run's folder and warns about engines that an
// earlier run left behind, in it or in any run folder under ./p2pfault-runs
// (the default place).
func prepareOut(out string, stderr io.Writer) error {
	if err := os.MkdirAll(out, runfolder.DirMode); err != nil {
		return exitcode.Usagef("create output folder %s: %w", out, err)
	}
	seen := map[string]bool{}
	for _, dir := range append(sessionDirs(out), runDirs()...) {
		if abs, err := filepath.Abs(dir); err == nil {
			if seen[abs] { // the run's own folder may be under ./p2pfault-runs
				continue
			}
			seen[abs] = true
		}
		left, err := runner.Leftovers(dir)
		if err != nil { // e.g. a record others could write: not acted on
			fmt.Fprintf(stderr, "warning: %v\n", err)
			continue
		}
		n := 0
		for _, l := range left {
			if !l.OwnerAlive { // a running p2pfault's engines are not left behind
				n++
			}
		}
		if n > 0 {
			fmt.Fprintf(stderr, "warning: %d engine(s) of an earlier run in %s are still alive; `p2pfault cleanup %s` ends them\n", n, dir, dir)
		}
		warnLeftoverTables(dir, stderr)
	}
	return nil
}

// runDirs lists the run folders under ./p2pfault-runs that hold a
// sessions.json (a slice's rows are one level deeper).
func runDirs() []string {
	var dirs []string
	for _, d := range runfolder.Runs() {
		dirs = append(dirs, sessionDirs(d)...)
	}
	return dirs
}

// sessionDirs returns dir if it holds a sessions.json, and the row folders
// of a slice in dir that do.
func sessionDirs(dir string) []string { return runfolder.Holding(dir, runfolder.Sessions) }

// writeEvents writes every event to path as it comes (compressed with c),
// flushed at once, so a crashed run still leaves its events for
// `p2pfault report`. The first write that fails (a full disk, a file
// system gone read-only) stops the run at once with stop(logFailed): a
// run that records nothing must not go on for hours, its faults in force.
// The run then ends as on any other cancellation, its host state undone.
// The events are read to the end all the same: the experiment never drops
// one, so an unread channel would stall it.
func writeEvents(wg *sync.WaitGroup, ch <-chan event.Event, path string, c report.Compression, stop context.CancelCauseFunc) <-chan error {
	errc := make(chan error, 1)
	log, err := report.NewEventLogWith(path, c)
	if err != nil {
		errc <- exitcode.Usagef("events log: %w", err)
		wg.Go(func() {
			for range ch {
			}
		})
		return errc
	}
	wg.Go(func() {
		var first error
		fail := func(err error) {
			if err != nil && first == nil {
				first = logFailed(path, err)
				stop(first)
			}
		}
		for ev := range ch {
			if first != nil {
				continue // the file is cut short: what follows would not read back
			}
			fail(log.Write(ev))
			// A compressed log writes a burst of events as one block,
			// once no more are waiting.
			if len(ch) == 0 && first == nil {
				fail(log.Flush())
			}
		}
		if err := log.Close(); first == nil {
			fail(err)
		}
		errc <- first
	})
	return errc
}

// logFailure is the error a run stops with when its events log cannot be
// written (exit 2): the file and the system's reason, as in
// "events log /x/events.jsonl: write: no space left on device: run
// stopped".
type logFailure struct {
	path string
	err  error
}

func (l logFailure) Error() string {
	why := l.err.Error()
	var pe *fs.PathError
	if errors.As(l.err, &pe) {
		why = pe.Op + ": " + pe.Err.Error()
	}
	return fmt.Sprintf("events log %s: %s: run stopped", l.path, why)
}

func (l logFailure) Unwrap() error { return l.err }

func logFailed(path string, err error) error { return exitcode.AsUsage(logFailure{path, err}) }

// writeReports rebuilds every report from the run's events file, written
// with c (events.jsonl or events.jsonl.zst; the same path `p2pfault
// report` takes), and prints the verdict table.
func writeReports(stdout io.Writer, out string, c report.Compression, armDirs []string, printTable bool) error {
	runs, err := report.RebuildAll(c.Path(out), out)
	if err != nil {
		return fmt.Errorf("write reports in %s: %w", out, err)
	}
	if len(armDirs) > 1 {
		for _, d := range armDirs {
			if _, err := report.RebuildAll(c.Path(d), d); err != nil {
				return fmt.Errorf("write reports in %s: %w", d, err)
			}
		}
	}
	if printTable {
		fmt.Fprintln(stdout)
		rows := report.Rows(runs)
		fmt.Fprint(stdout, report.Tables(rows)+windowsText(rows))
		printFailures(stdout, runs)
	}
	fmt.Fprintf(stdout, "reports: %s\n", out)
	return nil
}

// printFailures prints each failed row's failing checks and the seed
// line, and why a row cut short was (an interrupted row has no failures:
// its open checks are not a verdict).
func printFailures(w io.Writer, runs []report.Run) {
	for _, r := range runs {
		row := r.Row()
		switch {
		case row.Result == report.ResultInterrupted:
			fmt.Fprintf(w, "%s: INTERRUPTED (%s): no bound was broken before the cut; what never closed is not judged\n", r.Name(), row.CutShort)
			continue
		case row.CutShort != "":
			fmt.Fprintf(w, "%s: cut short: %s; a bound had already broken: FAIL\n", r.Name(), row.CutShort)
		}
		if row.Passed {
			continue
		}
		for _, c := range r.Verdict.Checks {
			switch {
			case c.Passed:
			case row.CutShort != "" && c.Empty:
				// Cut short before its window held a pull that ended.
				fmt.Fprintf(w, "%s: %s: left open: %s\n", r.Name(), c.Name, c.Detail)
			default:
				fmt.Fprintf(w, "%s: %s: %s\n", r.Name(), c.Name, c.Detail)
			}
		}
		for _, l := range row.WindowFailures() {
			fmt.Fprintf(w, "%s: %s\n", r.Name(), l)
		}
		for _, l := range row.NotJudged {
			fmt.Fprintf(w, "%s: not judged: %s\n", r.Name(), l)
		}
		fmt.Fprintf(w, "%s: %s\n", r.Name(), r.Verdict.Summary.Faulted.SeedLine("faulted"))
	}
}

func isTerminal(w io.Writer) bool {
	if o, ok := w.(*outputWatch); ok {
		w = o.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}
