package cli

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"p2pfault/runner"
)

// TestTheGoneCaseBringsItsClusterUnlessGiven: case gone's preset sets
// --source-dp, --mode and the sim's build settings that the user left
// alone, and nothing the user gave (a flag set to any value, an extra
// argument naming the sim's flag); on --engine vllm no sim argument, and
// with an attach file only what the file cannot say.
func TestTheGoneCaseBringsItsClusterUnlessGiven(t *testing.T) {
	parse := func(t *testing.T, args ...string) (*clusterFlags, *pflag.FlagSet) {
		var f clusterFlags
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f, fs
	}
	t.Run("nothing given", func(t *testing.T) {
		f, fs := parse(t)
		line := f.applyPreset(fs, "gone")
		if f.sourceDP != 2 || f.mode != "pd" {
			t.Errorf("source-dp %d, mode %q; want 2, pd", f.sourceDP, f.mode)
		}
		if strings.Join(f.decoderArgs, " ") != "--sim-dead-session-loads=timeout" || strings.Join(f.sourceArgs, " ") != "--sim-transfer-bandwidth=6e6" {
			t.Errorf("decoder args %q, source args %q", f.decoderArgs, f.sourceArgs)
		}
		for _, w := range []string{"case gone: --source-dp 2 --mode pd", "--decoder-arg=--sim-dead-session-loads=timeout", "#56828"} {
			if !strings.Contains(line, w) {
				t.Errorf("line %q lacks %q", line, w)
			}
		}
	})
	t.Run("the user's flags win", func(t *testing.T) {
		f, fs := parse(t, "--source-dp", "1", "--mode", "p2p", "--engine-arg=--sim-dead-session-loads=fail", "--source-arg", "--sim-transfer-bandwidth", "--source-arg", "1e9")
		if line := f.applyPreset(fs, "gone"); line != "" {
			t.Errorf("applied %q over the user's own", line)
		}
		if f.sourceDP != 1 || f.mode != "p2p" || len(f.decoderArgs) != 0 || len(f.sourceArgs) != 2 {
			t.Errorf("source-dp %d, mode %q, decoder args %q, source args %q", f.sourceDP, f.mode, f.decoderArgs, f.sourceArgs)
		}
	})
	t.Run("real vllm", func(t *testing.T) {
		f, fs := parse(t, "--engine", runner.EngineVLLM)
		f.applyPreset(fs, "gone")
		if f.sourceDP != 2 || f.mode != "pd" || len(f.decoderArgs)+len(f.sourceArgs) != 0 {
			t.Errorf("source-dp %d, mode %q, decoder args %q, source args %q", f.sourceDP, f.mode, f.decoderArgs, f.sourceArgs)
		}
	})
	t.Run("attached", func(t *testing.T) {
		f, fs := parse(t, "--attach", "cluster.yaml")
		if line := f.applyPreset(fs, "gone"); line != "" || f.sourceDP != 1 || f.mode != "p2p" {
			t.Errorf("applied %q to an attached cluster (source-dp %d, mode %q)", line, f.sourceDP, f.mode)
		}
	})
	t.Run("a case without a preset", func(t *testing.T) {
		f, fs := parse(t)
		if line := f.applyPreset(fs, "stall"); line != "" || f.sourceDP != 1 {
			t.Errorf("stall applied %q", line)
		}
	})
}
