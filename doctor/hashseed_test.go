package doctor

import (
	"errors"
	"strings"
	"testing"

	"p2pfault/fault"
	"p2pfault/netfault"
	"p2pfault/runner"
)

func withEnv(env map[string]string) Host {
	h := System()
	h.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	return h
}

func TestHashSeedAgreesWithTheRunnersOrSays(t *testing.T) {
	c := simCluster(t, runner.Config{SelfBin: "/bin/true"})
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
		want string
	}{
		{"unset", nil, true, "p2pfault starts all 3 engines with PYTHONHASHSEED=42 (unset in your environment)"},
		{"the same", map[string]string{"PYTHONHASHSEED": "42"}, true, "p2pfault starts all 3 engines with PYTHONHASHSEED=42, as your environment has it"},
		{"another", map[string]string{"PYTHONHASHSEED": "7"}, false, "your environment has PYTHONHASHSEED=7, but p2pfault starts every engine with PYTHONHASHSEED=42"},
		{"random", map[string]string{"PYTHONHASHSEED": "random"}, false, "your environment has PYTHONHASHSEED=random"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := HashSeed(withEnv(tc.env), []Cluster{c})
			if len(rs) != 1 || rs[0].OK != tc.ok || !strings.HasPrefix(rs[0].Found, tc.want) {
				t.Fatalf("got %v, want ok=%v and %q", rs, tc.ok, tc.want)
			}
			if !tc.ok && rs[0].Fix != "unset PYTHONHASHSEED, or set it to 42" {
				t.Errorf("fix %q", rs[0].Fix)
			}
		})
	}
}

func TestHashSeedIsNotCheckedWithoutLaunchedEngines(t *testing.T) {
	if rs := HashSeed(withEnv(map[string]string{"PYTHONHASHSEED": "7"}), nil); len(rs) != 0 {
		t.Errorf("an attached run (no launched engine): %v", rs)
	}
}

func TestNetworkRunsTheSetupOfEveryKindThatHasOne(t *testing.T) {
	h := System()
	kinds := map[string]*fault.Kind{
		"stall":     {Name: "stall"}, // no host check
		"partition": {Name: "partition", Setup: func() error { return nil }},
		"loss": {Name: "loss", Setup: func() error {
			return &netfault.SetupError{Need: "loss needs CAP_NET_ADMIN", How: "run as root or grant it with setcap cap_net_admin+ep /x/p2pfault"}
		}},
		"odd": {Name: "odd", Setup: func() error { return errors.New("read this process's capabilities: EINVAL") }},
	}
	h.Kind = func(n string) (*fault.Kind, bool) { k, ok := kinds[n]; return k, ok }
	rs := Network(h, []string{"stall", "partition", "loss", "partition", "heal-unknown", "odd"})
	if len(rs) != 3 {
		t.Fatalf("want partition, loss and odd once each:\n%s", lines(rs))
	}
	if !rs[0].OK || rs[0].Check != "partition" {
		t.Errorf("partition: %v", rs[0])
	}
	if rs[1].OK || rs[1].Found != "loss needs CAP_NET_ADMIN: missing here" || rs[1].Fix != "run as root or grant it with setcap cap_net_admin+ep /x/p2pfault" {
		t.Errorf("loss: %v", rs[1])
	}
	if rs[2].OK || !strings.Contains(rs[2].Found, "EINVAL") {
		t.Errorf("odd: %v", rs[2])
	}
}

func TestResultLines(t *testing.T) {
	if got, want := (Result{Check: "ports", OK: true, Found: "free: decoder HTTP 8200", Fix: "ignored"}).String(), "✓ ports: free: decoder HTTP 8200"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got, want := (Result{Check: "vllm", Found: `binary "x": not found`, Fix: "give --vllm-bin"}).String(), `✗ vllm: binary "x": not found → give --vllm-bin`; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	warned := []Result{{Check: "kube NetworkPolicy", OK: true, Warn: true, Found: "no policy-enforcing CNI found", Fix: "a partition may cut nothing"}}
	if got, want := warned[0].String(), "⚠ kube NetworkPolicy: no policy-enforcing CNI found → a partition may cut nothing"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if n := Failed(warned); n != 0 {
		t.Errorf("Failed counts a warning: %d", n)
	}
}
