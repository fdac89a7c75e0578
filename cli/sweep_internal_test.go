package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/runner"
)

// TestParseSweepsRefusesWhatTheEngineLacks: each bad --sweep is a usage
// error naming the bad thing; an unknown name lists the engine's settings.
func TestParseSweepsRefusesWhatTheEngineLacks(t *testing.T) {
	for _, tt := range []struct {
		engine string
		specs  []string
		flags  []string
		want   []string // words the error must hold
	}{
		{"sim", []string{"FOO=1,2"}, nil, []string{`no setting "FOO"`, "it has VLLM_P2P_HANDSHAKE_TIMEOUT_S, kv_load_failure_policy, unbound_store_timeout_s, sim-lookup-timeout", "sim-store-timeout"}},
		{"vllm", []string{"sim-load-timeout=5s"}, nil, []string{`engine vllm has no setting "sim-load-timeout"`, "it has VLLM_P2P_HANDSHAKE_TIMEOUT_S, kv_load_failure_policy, unbound_store_timeout_s"}},
		{"sim", []string{"VLLM_P2P_HANDSHAKE_TIMEOUT_S=10,ten"}, nil, []string{`value "ten" is not a positive number of seconds`}},
		{"sim", []string{"VLLM_P2P_HANDSHAKE_TIMEOUT_S=0"}, nil, []string{`value "0" is not a positive number of seconds`}},
		{"sim", []string{"kv_load_failure_policy=fail,retry"}, nil, []string{`value "retry" is not fail or recompute`}},
		{"virtual", []string{"sim-load-timeout=5"}, nil, []string{`value "5" is not a positive duration`}},
		{"sim", []string{"unbound_store_timeout_s=60,60"}, nil, []string{`value "60" given twice`}},
		{"sim", []string{"VLLM_P2P_HANDSHAKE_TIMEOUT_S=5", "VLLM_P2P_HANDSHAKE_TIMEOUT_S=10"}, nil, []string{"given twice"}},
		{"sim", []string{"VLLM_P2P_HANDSHAKE_TIMEOUT_S"}, nil, []string{"want NAME=V1,V2,..."}},
		{"sim", []string{"VLLM_P2P_HANDSHAKE_TIMEOUT_S=5"}, []string{"--handshake-timeout", "10s"}, []string{"--handshake-timeout both set it"}},
	} {
		cmd, _ := newSliceCommand()
		if err := cmd.Flags().Parse(tt.flags); err != nil {
			t.Fatal(err)
		}
		_, err := parseSweeps(tt.specs, tt.engine, cmd.Flags())
		if err == nil || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("%s %v: error %v, want a usage error", tt.engine, tt.specs, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %v: %q lacks %q", tt.engine, tt.specs, err, w)
			}
		}
	}
}

// TestSweepPointsAreTheCrossProduct: two --sweep flags give every pair,
// the last varying fastest, and each point sets its values on the
// engines' configuration (environment, kv-transfer-config, sim flag).
func TestSweepPointsAreTheCrossProduct(t *testing.T) {
	cmd, _ := newSliceCommand()
	axes, err := parseSweeps([]string{"VLLM_P2P_HANDSHAKE_TIMEOUT_S=5,30", "kv_load_failure_policy=fail,recompute", "--sim-load-timeout=2s"}, "sim", cmd.Flags())
	if err != nil {
		t.Fatal(err)
	}
	points := sweepPoints(axes)
	var got []string
	for _, p := range points {
		got = append(got, event.SettingsText(p.settings, " "))
	}
	want := []string{
		"VLLM_P2P_HANDSHAKE_TIMEOUT_S=5 kv_load_failure_policy=fail sim-load-timeout=2s",
		"VLLM_P2P_HANDSHAKE_TIMEOUT_S=5 kv_load_failure_policy=recompute sim-load-timeout=2s",
		"VLLM_P2P_HANDSHAKE_TIMEOUT_S=30 kv_load_failure_policy=fail sim-load-timeout=2s",
		"VLLM_P2P_HANDSHAKE_TIMEOUT_S=30 kv_load_failure_policy=recompute sim-load-timeout=2s",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("points %q, want %q", got, want)
	}
	var rc runner.Config
	points[1].apply(&rc)
	if rc.HandshakeTimeout != 5*time.Second || rc.LoadFailurePolicy != "recompute" || !slices.Equal(rc.ExtraArgs, []string{"--sim-load-timeout=2s"}) {
		t.Errorf("point 1 applied %+v", rc)
	}
	specs, err := runner.Plan(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(specs[0].Env, "VLLM_P2P_HANDSHAKE_TIMEOUT_S=5") {
		t.Errorf("source-0's environment %q lacks the handshake timeout", specs[0].Env)
	}
	axes, _ = parseSweeps([]string{"unbound_store_timeout_s=90"}, "vllm", cmd.Flags())
	rc = runner.Config{Engine: runner.EngineVLLM}
	sweepPoints(axes)[0].apply(&rc)
	specs, err = runner.Plan(rc)
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(specs[0].Args, " "); !strings.Contains(args, `"port":7777,"unbound_store_timeout_s":90}`) {
		t.Errorf("the p2p tier lacks unbound_store_timeout_s: %s", args)
	}
}

// TestSliceRefusesASweepItCannotLabel: a sweep of engines p2pfault does
// not start, or with series labelled only by arm, mode and case, is a
// usage error before anything starts.
func TestSliceRefusesASweepItCannotLabel(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--sweep", "VLLM_P2P_HANDSHAKE_TIMEOUT_S=5", "--metrics-listen", "0"}, "--metrics-listen with --sweep"},
		{[]string{"--sweep", "VLLM_P2P_HANDSHAKE_TIMEOUT_S=5", "--attach", "cluster.yaml"}, "with --attach the engines are yours"},
	} {
		cmd, o := newSliceCommand()
		if err := cmd.Flags().Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		o.flags.out = t.TempDir()
		_, err := o.configure(cmd)
		if exitcode.Code(err) != exitcode.Usage || !strings.Contains(fmt.Sprint(err), tt.want) {
			t.Errorf("%v: %v, want a usage error saying %q", tt.args, err, tt.want)
		}
	}
}
