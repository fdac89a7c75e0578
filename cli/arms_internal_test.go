package cli

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"p2pfault/exitcode"
	"p2pfault/experiment"
	"p2pfault/launch"
	"p2pfault/runner"
)

// TestArmConfigsSplitGPUsPortsAndFolders: with --engine vllm and two
// builds, each arm gets its own binary, a contiguous share of --gpus, free
// ports from one pool and a folder ARM-CASE; one arm keeps today's layout.
func TestArmConfigsSplitGPUsPortsAndFolders(t *testing.T) {
	for _, tt := range []struct {
		gpus string
		want [][]string
	}{
		{"0,1,2,3,4,5", [][]string{{"0", "1", "2"}, {"3", "4", "5"}}},
		{"0,1,2", [][]string{{"0"}, {"1", "2"}}},
	} {
		cmd, o := newRunCommand()
		if err := cmd.Flags().Parse([]string{"--engine", "vllm", "--arm", "main=/a/vllm", "--arm", "fixed=/b/vllm", "--gpus", tt.gpus}); err != nil {
			t.Fatal(err)
		}
		specs, err := o.armSpecs()
		if err != nil {
			t.Fatal(err)
		}
		ra, err := o.armConfigs(cmd, specs, "stall", "/x", true)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range ra.configs {
			rc := launched(t, c)
			if !reflect.DeepEqual(rc.GPUs, tt.want[i]) {
				t.Errorf("--gpus %s: arm %s GPUs %v, want %v", tt.gpus, c.Arm, rc.GPUs, tt.want[i])
			}
			if !rc.FreePorts || rc.PortPool == nil || rc.PortPool != launched(t, ra.configs[0]).PortPool {
				t.Errorf("arm %s: free ports %v from pool %p, want free ports from one shared pool", c.Arm, rc.FreePorts, rc.PortPool)
			}
		}
		if a, b := launched(t, ra.configs[0]).VLLMBin, launched(t, ra.configs[1]).VLLMBin; a != "/a/vllm" || b != "/b/vllm" {
			t.Errorf("binaries %q, %q", a, b)
		}
		if !reflect.DeepEqual(ra.dirs, []string{"/x/main-stall", "/x/fixed-stall"}) {
			t.Errorf("folders %v", ra.dirs)
		}
	}

	cmd, o := newRunCommand()
	if err := cmd.Flags().Parse([]string{"--gpus", "0,1"}); err != nil {
		t.Fatal(err)
	}
	specs, _ := o.armSpecs()
	ra, err := o.armConfigs(cmd, specs, "none", "/x", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ra.configs) != 1 || ra.configs[0].Arm != "main" || ra.dirs[0] != "/x" || launched(t, ra.configs[0]).FreePorts ||
		!reflect.DeepEqual(launched(t, ra.configs[0]).GPUs, []string{"0", "1"}) {
		t.Errorf("one arm: %+v in %v, want main in /x itself with every GPU and the default ports", ra.configs[0].Cluster, ra.dirs)
	}
}

// launched is the engines an arm's configuration launches.
func launched(t *testing.T, c experiment.Config) runner.Config {
	t.Helper()
	l, ok := c.Cluster.(launch.Opener)
	if !ok {
		t.Fatalf("arm %s opens %T, want launch.Opener", c.Arm, c.Cluster)
	}
	return l.Config
}

// TestArmsAreBuildsOfTheSim: each simulated arm reaches every engine's
// command line as the flags of the build it stands for, before the
// user's own (so an --engine-arg naming the same flag wins); an unknown
// arm is a usage error listing the arms and the build each is; with
// --engine vllm an arm is a build and adds no flag.
func TestArmsAreBuildsOfTheSim(t *testing.T) {
	for arm, want := range map[string][]string{
		"main":    {"--p2p-pending-handshake=wait"},
		"fixed":   {"--p2p-pending-handshake=prefill"},
		"today":   {"--p2p-pending-handshake=wait", "--sim-lookup-deadline=none"},
		"pr56836": {"--p2p-pending-handshake=wait", "--sim-lookup-deadline=progress", "--sim-lookup-timeout=30s"},
	} {
		var f clusterFlags
		fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"--engine-arg=--sim-lookup-timeout=12s"}); err != nil {
			t.Fatal(err)
		}
		rc, err := f.launchConfig(fs, arm, "")
		if err != nil {
			t.Fatalf("%s: %v", arm, err)
		}
		if got := rc.ExtraArgs; !slices.Equal(got, append(want, "--sim-lookup-timeout=12s")) {
			t.Errorf("arm %s: engine arguments %q, want %q then the user's", arm, got, want)
		}
	}
	_, err := armArgs(runner.EngineSim, "nightly")
	if exitcode.Code(err) != exitcode.Usage {
		t.Fatalf("arm nightly: %v, want a usage error", err)
	}
	for _, w := range []string{`arm "nightly"`, "main (", "fixed (main + PR #64501", "today (vLLM main @099ef822", "pr56836 (today + PR #56836"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error %q does not say %q", err, w)
		}
	}
	if args, err := armArgs(runner.EngineVLLM, "nightly"); err != nil || args != nil {
		t.Errorf("--engine vllm arm: %q, %v; want no flags", args, err)
	}
}
