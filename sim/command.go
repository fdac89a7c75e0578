// Package sim is p2pfault's simulated engine: `p2pfault sim serve MODEL`, a
// GPU-less drop-in for `vllm serve` in P2P KV-offload mode. Like vLLM it
// runs as two processes in one session: an HTTP front end and an engine-core
// child that owns the P2P socket and runs the scheduler loop, so a fault
// that misses one of them shows.
package sim

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"p2pfault/exitcode"
	"p2pfault/sim/simlog"
)

// Command is the `sim` command with its `serve` subcommand and the hidden
// `core` the front end starts.
func Command() *cobra.Command {
	cmd := &cobra.Command{
		Use:           "sim",
		Short:         "Simulated vLLM engine with a P2P KV-offload tier",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return exitcode.Usagef("unknown command %q for \"sim\" (want serve)", args[0])
			}
			return cmd.Help()
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	cmd.AddCommand(serveCommand(), coreCommand())
	return cmd
}

func flagError(_ *cobra.Command, err error) error { return exitcode.AsUsage(err) }

func serveCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve MODEL",
		Short: "Serve MODEL like `vllm serve` (HTTP front end + engine core)",
		Long: "Serve MODEL like `vllm serve`: the vLLM flags of a P2P KV-offload launch, plus --sim-* knobs.\n" +
			"Environment: PYTHONHASHSEED (peers must share it), VLLM_P2P_HANDSHAKE_TIMEOUT_S (default 30),\n" +
			"VLLM_LOG_STATS_INTERVAL (seconds between stats lines, default 10).",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return exitcode.Usagef("serve takes exactly one MODEL argument, got %d %q", len(args), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.resolve(args[0], getenv)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runServe(ctx, cfg, simlog.New(os.Stderr))
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	f.register(cmd.Flags())
	return cmd
}

func coreCommand() *cobra.Command {
	var config string
	var rank int
	cmd := &cobra.Command{
		Use:           "core --data-parallel-rank R --config JSON",
		Short:         "Engine-core child of `sim serve` (started by it, link on fd 3)",
		Hidden:        true,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return runCoreProcess(ctx, config, rank, simlog.New(os.Stderr))
		},
	}
	cmd.SetFlagErrorFunc(flagError)
	cmd.Flags().StringVar(&config, "config", "", "engine-core configuration (JSON)")
	cmd.Flags().IntVar(&rank, coreRankFlag[2:], 0, "the core's data-parallel rank (on the command line so a tool can find one rank's process)")
	return cmd
}
