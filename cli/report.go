package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"p2pfault/exitcode"
	"p2pfault/netfault"
	"p2pfault/report"
	"p2pfault/runner"
)

func newReportCommand() *cobra.Command {
	var out string
	var ladder int
	cmd := &cobra.Command{
		Use:   "report DIR/events.jsonl",
		Short: "Rebuild the reports of a finished or crashed run from its events",
		Long: "Read a run's events.jsonl or events.jsonl.zst (also one cut short by a crash; plain\n" +
			"or zstd is told by the content) and write report.md,\n" +
			"report.json, junit.xml, report.html and timeline.svg next to it (or in --out), then\n" +
			"print the verdict table. A truncated file is reported as such. With --ladder N (a run\n" +
			"with --link) also print, for the N slowest pulls of each fault window, the control\n" +
			"messages between the decoder and the source over the pull's time: a sequence diagram.",
		Args: oneArg("report", "events.jsonl file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if ladder < 0 {
				return exitcode.Usagef("report: --ladder %d: want a number of pulls, 0 or more", ladder)
			}
			path, err := eventsArg("report", args[0])
			if err != nil {
				return err
			}
			dir := out
			if dir == "" {
				dir = filepath.Dir(path)
			}
			runs, err := report.RebuildAll(path, dir)
			if err != nil {
				return exitcode.AsUsage(err)
			}
			w := cmd.OutOrStdout()
			if runs[0].Truncated {
				fmt.Fprintf(w, "note: %s was truncated (the run did not end: cut short); the report covers what it holds\n", path)
			}
			fmt.Fprint(w, report.Tables(report.Rows(runs))+windowsText(report.Rows(runs)))
			printFailures(w, runs)
			fmt.Fprintf(w, "reports: %s\n", dir)
			if ladder > 0 {
				return printLadders(w, path, ladder)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the reports here instead of next to the events file")
	cmd.Flags().IntVar(&ladder, "ladder", 0, "also print the ladder of the N slowest pulls of each fault window: the messages between decoder and source over time, as the link saw them (a run with --link)")
	return cmd
}

// printLadders prints the ladders of path's n slowest pulls per window.
func printLadders(w io.Writer, path string, n int) error {
	text, err := report.LadderOf(path, n)
	if err != nil {
		return err
	}
	if text == "" {
		fmt.Fprintln(w, "\nno ladder: the run relayed no link (run with --link), its events hold no message")
		return nil
	}
	fmt.Fprint(w, "\n"+text)
	return nil
}

func newCleanupCommand() *cobra.Command {
	var attachFile string
	cmd := &cobra.Command{
		Use:   "cleanup [DIR]",
		Short: "End the engines a run left behind (reads DIR/sessions.json)",
		Long: "Read the sessions.json a run keeps in its output folder and end every engine it\n" +
			"names that is still alive and still that engine (checked by its start time and its\n" +
			"command line in /proc): SIGCONT, SIGTERM, SIGKILL after a grace, and delete every firewall table\n" +
			"it names (a network fault's: its partition is healed). DIR may be a run's folder or a\n" +
			"slice's (its rows are cleaned). Without DIR, every run folder under ./p2pfault-runs.\n" +
			"With --orphans, also every firewall table and engine on this host whose p2pfault is gone,\n" +
			"found by the owner (pid and start time) each carries even when no record names it;\n" +
			"`cleanup --orphans` without DIR does only that.\n" +
			"With --kube, also the Kubernetes cluster, by label (no record needed): every object\n" +
			"labelled app.kubernetes.io/managed-by=p2pfault deleted, every pod labelled\n" +
			"p2pfault.io/stalled resumed, every p2pfault.io/cut label removed; `cleanup --kube`\n" +
			"without DIR does only that. `cleanup --attach FILE` with a kubernetes: block is --kube\n" +
			"with the block's kubeconfig, context, namespace (that one only) and container.\n\n" +
			"An attached run's stalls.json: a stalled session is resumed (SIGCONT, after the same\n" +
			"checks); a source stalled by a command is resumed with the resume command of the\n" +
			"attach file --attach names, never with a command read from the record.\n\n" +
			"Records are data: a sessions.json or stalls.json that is a symbolic link, not the\n" +
			"invoking user's, or writable by group or others is refused (exit 2, naming the file\n" +
			"and why).",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return exitcode.Usagef("cleanup: want at most one folder, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Attached runs: stalls a dead p2pfault left stopped (stalls.json).
			from, err := cleanupResumeFrom(attachFile)
			if err != nil {
				return err
			}
			resumed, err := resumeStalls(cmd.Context(), stallDirs(args), cmd.OutOrStdout(), from)
			if err != nil {
				return err
			}
			var dirs []string
			if len(args) == 0 {
				dirs = runDirs()
			} else {
				st, err := os.Stat(args[0])
				if err != nil {
					return exitcode.Usagef("cleanup: %w", err)
				}
				if !st.IsDir() {
					return exitcode.Usagef("cleanup %s: not a folder (give a run's or a slice's output folder)", args[0])
				}
				if dirs = sessionDirs(args[0]); len(dirs) == 0 {
					if resumed > 0 { // an attached run's folder: no engines of its own
						return nil
					}
					fmt.Fprintf(cmd.OutOrStdout(), "cleanup: no %s in %s or its row folders: nothing to clean up\n", runner.SessionsFile, args[0])
					return nil
				}
			}
			total := 0
			for _, d := range dirs {
				n, err := runner.Cleanup(cmd.Context(), d, netfault.Host{}, cmd.OutOrStdout())
				total += n
				if err != nil {
					return exitcode.AsUsage(fmt.Errorf("cleanup %s: %w", d, err))
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cleanup: ended %d engine process(es)\n", total)
			return nil
		},
	}
	cmd.Flags().StringVar(&attachFile, "attach", "", "the attach file of an attached run: a source stalled by a command is resumed with this file's resume command (cleanup never runs a command read from a record); a file with a kubernetes: block is --kube with its settings")
	addOrphansFlag(cmd)
	addKubeCleanupFlag(cmd)
	return cmd
}
