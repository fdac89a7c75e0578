package cli

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"p2pfault/attach"
	"p2pfault/doctor"
	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/kube"
	"p2pfault/launch"
	"p2pfault/netfault"
	"p2pfault/runner"
	"p2pfault/vcluster"
)

// newDoctorCommand is `p2pfault doctor [run|slice] [flags]`: package
// doctor's checks on the run that `p2pfault run` (or `slice`) would start
// with the same flags. The subcommands are run's and slice's own commands
// (their flags, defaults and checks), with a RunE that plans instead of
// runs, so doctor takes every flag they take and refuses what they refuse
// with the same words.
func newDoctorCommand() *cobra.Command {
	runCmd, runOpts := newRunCommand()
	runCmd.Short = "Check what `p2pfault run` with these flags needs, without running it"
	runCmd.Long = "Check, without starting anything, what `p2pfault run` with the same flags needs:\n" +
		"the engine binary and the flags its serve knows, GPUs, ports, PYTHONHASHSEED, the rights of\n" +
		"network faults, the attached engines. One line per check; exit 0 if all pass, 1 if one fails."
	runCmd.RunE = func(cmd *cobra.Command, _ []string) error { return doctorRun(cmd, runOpts) }
	sliceCmd, sliceOpts := newSliceCommand()
	sliceCmd.Short = "Check what `p2pfault slice` with these flags needs, without running it"
	sliceCmd.Long = "Check, without starting anything, what `p2pfault slice` with the same flags needs\n" +
		"(every row's engines, the rows running at once on the GPUs). One line per check; exit 0 if\n" +
		"all pass, 1 if one fails."
	sliceCmd.RunE = func(cmd *cobra.Command, _ []string) error { return doctorSlice(cmd, sliceOpts) }

	cmd := &cobra.Command{
		Use:   "doctor [run|slice] [flags]",
		Short: "Check, without running, what a run with these flags needs (vllm, GPUs, ports, rights)",
		Long: "Check, without starting a run, everything that would make it fail early: the engine\n" +
			"binary and its version, that its serve knows every flag the run passes, the GPUs\n" +
			"(nvidia-smi -L) against --gpus and the arms, the ports, PYTHONHASHSEED, CAP_NET_ADMIN and\n" +
			"nftables when a network fault is scripted, the engines of --attach, the pods and API access of\n" +
			"--kube (a SelfSubjectAccessReview per verb a run needs, each missing one named; whether its CNI enforces\n" +
			"NetworkPolicy, as far as its agents' pods tell), and what a killed run left\n" +
			"on the host (a firewall table or engine whose p2pfault is gone: `cleanup --orphans`). Prints one line per\n" +
			"check (✓ or ✗, what was found, → how to fix; ⚠ a caveat that does not fail).\n\n" +
			"`p2pfault doctor [flags]` checks `p2pfault run [flags]`; `p2pfault doctor slice [flags]`\n" +
			"checks `p2pfault slice [flags]`. Exit 0 if every check passes, 1 if one fails, 2 on a usage\n" +
			"error (the same as run's or slice's).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if os.Getenv("FAULTS") == "1" {
				// Bare p2pfault is then the slice: say which doctor checks it
				// rather than check a run that would not happen.
				return exitcode.Usagef("FAULTS=1: bare p2pfault runs the slice; check it with `p2pfault doctor slice` (with slice's flags)")
			}
			return doctorRun(cmd, runOpts)
		},
	}
	// Bare doctor takes run's flags, as bare p2pfault does.
	cmd.Flags().AddFlagSet(runCmd.Flags())
	cmd.AddCommand(runCmd, sliceCmd)
	return cmd
}

// doctorRun checks the arms `p2pfault run` would start.
func doctorRun(cmd *cobra.Command, o *runOptions) error {
	p, err := o.configure(cmd)
	if err != nil {
		return err
	}
	// The arms start together.
	return runDoctor(cmd, p.arms.configs, len(p.arms.configs), o.flags.attach, o.flags.kube.file, false)
}

// doctorSlice checks the rows `p2pfault slice` would run.
func doctorSlice(cmd *cobra.Command, o *sliceOptions) error {
	p, err := o.configure(cmd)
	if err != nil {
		return err
	}
	return runDoctor(cmd, p.configs, min(p.parallel, len(p.configs)), o.flags.attach, o.flags.kube.file, true)
}

// runDoctor makes each configuration's experiment as the run would (its
// usage errors are doctor's, exit 2), plans its engines with the
// configuration the run gives the runner, runs the checks and prints them.
// kubeFile is the attach file whose kubernetes: block the cluster is ("":
// none, or --kube's flags).
func runDoctor(cmd *cobra.Command, cfgs []experiment.Config, atOnce int, attachPath, kubeFile string, rows bool) error {
	plan := doctor.Plan{AtOnce: atOnce}
	for _, cfg := range cfgs {
		tl, err := cfg.ScriptedTimeline()
		if err != nil {
			return exitcode.AsUsage(err)
		}
		for _, s := range tl {
			plan.Kinds = append(plan.Kinds, s.Kind.Name)
		}
		if attachPath != "" {
			continue // checked against the file once it is open (Attached.Fits)
		}
		if k, onKube := cfg.Cluster.(kube.Opener); onKube {
			return kubeDoctor(cmd, k.Config, kubeFile, plan.Kinds)
		}
		if err := checkConfig(cfg); err != nil {
			return err
		}
		if _, virtual := cfg.Cluster.(vcluster.Opener); virtual {
			// Its engines are goroutines of the run's own process: no
			// binary, GPU, port or firewall of this host is theirs.
			return exitcode.Usagef("doctor checks what a run needs of this host, and --engine virtual needs nothing of it (no process, port or firewall): run it")
		}
		l, ok := cfg.Cluster.(launch.Opener)
		if !ok {
			return fmt.Errorf("arm %s: no engines to launch", cfg.Arm)
		}
		cc := l.Runner(experiment.OpenEnv{OutDir: cfg.OutDir, TimeScale: cfg.TimeScale})
		specs, err := runner.Plan(cc)
		if err != nil {
			return err
		}
		label := cfg.Arm
		if rows {
			label += "/" + cfg.Case
		}
		plan.Clusters = append(plan.Clusters, doctor.Cluster{Label: label, Arm: cfg.Arm, Config: cc, Specs: specs})
	}
	if attachPath != "" {
		plan.Attach = &doctor.Attached{Path: attachPath, Fits: func(cl *attach.Cluster) error {
			for _, cfg := range cfgs {
				cfg.Cluster = cl
				if err := checkConfig(cfg); err != nil {
					if len(cfgs) > 1 {
						return fmt.Errorf("%s/%s: %w", cfg.Arm, cfg.Case, err)
					}
					return err
				}
			}
			return nil
		}}
	}
	results := doctor.Run(cmd.Context(), plan, doctorHost())
	out := cmd.OutOrStdout()
	for _, r := range results {
		fmt.Fprintln(out, r)
	}
	if n := doctor.Failed(results); n > 0 {
		return &exitcode.Error{Code: exitcode.Failed, Err: fmt.Errorf("doctor: %d of %d checks failed", n, len(results))}
	}
	fmt.Fprintf(out, "doctor: all %d checks passed\n", len(results))
	return nil
}

// checkConfig is experiment.New's check of a run's configuration. The
// host check of the kinds the run fires (a network fault without
// CAP_NET_ADMIN) is the last thing New does; doctor reports it as a line
// of its own, so that error is not a usage error here.
func checkConfig(cfg experiment.Config) error {
	_, err := experiment.New(cfg)
	var se *netfault.SetupError
	if errors.As(err, &se) {
		return nil
	}
	return err
}

// doctorHost is the host the doctor checks: the real one. A test that
// counts the doctor's checks swaps its orphan scan (HideHostOrphans), since
// other packages' tests leave and sweep orphans on the same host meanwhile.
var doctorHost = doctor.System
