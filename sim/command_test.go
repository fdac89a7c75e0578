package sim

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"p2pfault/exitcode"
	"p2pfault/internal/syncbuf"
)

// runToExit runs `p2pfault sim ...` to its end and returns its exit code
// and stderr; a run still going after 20 s is killed and fails the test.
func runToExit(t *testing.T, args, env []string) (int, string) {
	t.Helper()
	cmd := engineCmd("", args, env)
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), stderr.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, stderr.String()
	case <-time.After(20 * time.Second):
		t.Fatalf("sim %v still running after 20s:\n%s", args, stderr.String())
		return 0, ""
	}
}

func TestBadFlagsAreUsageErrors(t *testing.T) {
	serve := func(extra ...string) []string {
		return append([]string{"sim", "serve", "m", "--port", "0", "--sim-startup-delay", "0"}, extra...)
	}
	kv := func(extraConfig string) string {
		return `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{` + extraConfig + `}}`
	}
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"an unknown flag", serve("--no-such-flag"), nil, "unknown flag: --no-such-flag"},
		{"a port that is not a number", serve("--port", "http"), nil, `invalid argument "http" for "--port"`},
		{"a port out of range", serve("--port", "70000"), nil, "--port 70000"},
		{"a non-loopback host", serve("--host", "0.0.0.0"), nil, `--host "0.0.0.0"`},
		{"no MODEL", []string{"sim", "serve"}, nil, "exactly one MODEL argument"},
		{"a zero block size", serve("--block-size", "0"), nil, "--block-size 0"},
		{"a negative max-model-len", serve("--max-model-len=-5"), nil, "--max-model-len -5"},
		{"a GPU fraction over 1", serve("--gpu-memory-utilization", "1.5"), nil, "--gpu-memory-utilization 1.5"},
		{"a zero TP size", serve("--tensor-parallel-size", "0"), nil, "--tensor-parallel-size 0"},
		{"an unknown pending-handshake mode", serve("--p2p-pending-handshake", "retry"), nil, `--p2p-pending-handshake "retry"`},
		{"a zero time scale", serve("--sim-time-scale", "0"), nil, "--sim-time-scale 0"},
		{"a negative tick", serve("--sim-tick=-1ms"), nil, "--sim-tick -1ms"},
		{"a zero lookup timeout", serve("--sim-lookup-timeout", "0s"), nil, "--sim-lookup-timeout 0s"},
		{"a duration without a unit", serve("--sim-heartbeat-interval", "2"), nil, `"--sim-heartbeat-interval"`},
		{"a negative startup delay", serve("--sim-startup-delay=-1s"), nil, "--sim-startup-delay -1s"},
		{"a zero bandwidth", serve("--sim-transfer-bandwidth", "0"), nil, "--sim-transfer-bandwidth 0"},
		{"a bad stale-route boolean", serve("--sim-stale-route=maybe"), nil, `"--sim-stale-route"`},
		{"a time scale that rounds a timeout to zero", serve("--sim-time-scale", "1e-12"), nil, "--sim-time-scale 1e-12"},
		{"kv-transfer-config that is not JSON", serve("--kv-transfer-config", "{bad"), nil, "--kv-transfer-config: invalid JSON"},
		{"kv-transfer-config without kv_connector", serve("--kv-transfer-config", `{"kv_role":"kv_both"}`), nil, `missing key "kv_connector"`},
		{"another connector", serve("--kv-transfer-config", `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`), nil, `kv_connector "NixlConnector" is not supported`},
		{"kv-transfer-config without kv_role", serve("--kv-transfer-config", `{"kv_connector":"OffloadingConnector"}`), nil, `missing key "kv_role"`},
		{"no extra config", serve("--kv-transfer-config", `{"kv_connector":"OffloadingConnector","kv_role":"kv_both"}`), nil, `missing key "kv_connector_extra_config"`},
		{"another spec", serve("--kv-transfer-config", kv(`"spec_name":"CPUOffloadingSpec","cpu_bytes_to_use":1`)), nil, `spec_name "CPUOffloadingSpec" is not supported`},
		{"no cpu_bytes_to_use", serve("--kv-transfer-config", kv(`"spec_name":"TieringOffloadingSpec"`)), nil, `missing key "kv_connector_extra_config.cpu_bytes_to_use"`},
		{"a fractional cpu_bytes_to_use", serve("--kv-transfer-config", kv(`"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":2.5`)), nil, "cpu_bytes_to_use must be a positive integer, got 2.5"},
		{"a tier without a type", serve("--kv-transfer-config", kv(`"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":1,"secondary_tiers":[{"port":1}]`)), nil, `missing key "kv_connector_extra_config.secondary_tiers[0].type"`},
		{"a tier port out of range", serve("--kv-transfer-config", kv(`"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":1,"secondary_tiers":[{"type":"p2p","port":99999}]`)), nil, "secondary_tiers[0].port must be an integer in 0..65535, got 99999"},
		{"a bad load-failure policy", serve("--kv-transfer-config", `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_load_failure_policy":"retry","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":1}}`), nil, `kv_load_failure_policy "retry"`},
		{"a handshake timeout that is not a number", serve(), []string{"VLLM_P2P_HANDSHAKE_TIMEOUT_S=soon"}, `VLLM_P2P_HANDSHAKE_TIMEOUT_S="soon"`},
		{"a zero handshake timeout", serve(), []string{"VLLM_P2P_HANDSHAKE_TIMEOUT_S=0"}, `VLLM_P2P_HANDSHAKE_TIMEOUT_S="0"`},
		{"a stats interval that is not a number", serve(), []string{"VLLM_LOG_STATS_INTERVAL=often"}, `VLLM_LOG_STATS_INTERVAL="often"`},
		{"a negative stats interval", serve(), []string{"VLLM_LOG_STATS_INTERVAL=-1"}, `VLLM_LOG_STATS_INTERVAL="-1"`},
		{"a hash seed that is not an integer", serve(), []string{"PYTHONHASHSEED=abc"}, `PYTHONHASHSEED="abc"`},
		{"an unknown sim subcommand", []string{"sim", "serv"}, nil, `unknown command "serv"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stderr := runToExit(t, tt.args, tt.env)
			if code != exitcode.Usage {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, exitcode.Usage, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr)
			}
		})
	}
}

func TestTakenPortFailsNamingIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a taken HTTP port", []string{"--port", fmt.Sprint(port)}, fmt.Sprintf("bind HTTP port 127.0.0.1:%d", port)},
		{"a taken P2P port", []string{"--port", "0", "--kv-transfer-config", strings.Replace(kvConfig, `"port":0`, fmt.Sprintf(`"port":%d`, port), 1)},
			fmt.Sprintf("bind P2P port 127.0.0.1:%d", port)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := runToExit(t, append([]string{"sim", "serve", "m", "--sim-startup-delay", "0"}, tt.args...), nil)
			if code != exitcode.Failed {
				t.Errorf("exit code %d, want %d", code, exitcode.Failed)
			}
			if !strings.Contains(stderr, tt.want) || !strings.Contains(stderr, "address already in use") {
				t.Errorf("stderr lacks %q and the cause:\n%s", tt.want, stderr)
			}
			if strings.Contains(stderr, "engine ready") {
				t.Errorf("engine claimed ready on a taken port:\n%s", stderr)
			}
		})
	}
}

func TestRandomHashSeedIsWarned(t *testing.T) {
	e := startEngine(t, "engine", engineOpts{env: []string{"PYTHONHASHSEED="}, noP2P: true})
	waitLog(t, e, "WARNING", time.Second)
	waitLog(t, e, "PYTHONHASHSEED is not set: using random hash seed", time.Second)
}

func TestHealthIsRefusedWhileTheModelLoads(t *testing.T) {
	// A port picked by listening on port 0: the engine must be given it
	// up front for the refusal during the load to be observable.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	started := time.Now()
	cmd := engineCmd("", []string{"sim", "serve", "m", "--port", fmt.Sprint(port), "--sim-startup-delay", "1500ms"}, nil)
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
		waitSessionGone(t, pid)
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/health", port)
	c := newClient(time.Second)
	refused := 0
	for time.Since(started) < time.Second {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			t.Fatalf("/health answered %d %v into a 1.5 s model load", resp.StatusCode, time.Since(started))
		} else if strings.Contains(err.Error(), "connection refused") {
			refused++
		}
		time.Sleep(50 * time.Millisecond)
	}
	if refused == 0 {
		t.Errorf("no /health attempt was refused during the load")
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "engine ready") {
		if time.Now().After(deadline) {
			t.Fatalf("not ready:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(started); d < 1500*time.Millisecond {
		t.Errorf("ready after %v, before the 1.5 s load", d)
	}
	resp, err := c.Get(url)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/health once ready: %v %v", resp, err)
	}
	resp.Body.Close()
}
