package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"p2pfault/cli"
)

// TestDurationsAreCheckedAfterScaling: a duration that overflows or
// rounds to zero once multiplied by --time-scale is a usage error (exit 2)
// naming the flag (or the timeline step, or the swept setting) and both
// values, said once, before anything starts or any folder is made. Before,
// --duration 2000000h --time-scale 1000 ran for ever recording
// duration_ns -9223372036854775808, a stall's overflow failed only when
// it fired, and --time-scale 1e-300 failed every engine's start with each
// line printed many times.
func TestDurationsAreCheckedAfterScaling(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"run length overflows", []string{"run", "--headless", "--duration", "2000000h", "--time-scale", "1000"},
			"--duration 2000000h0m0s × --time-scale 1000 overflows: at this scale a duration may be at most 2562h2m52s"},
		{"stall length overflows", []string{"run", "--headless", "--case", "stall", "--stall-for", "2000000h", "--time-scale", "4"},
			"--stall-for 2000000h0m0s × --time-scale 4 overflows: at this scale a duration may be at most 640511h56m49s"},
		{"every duration rounds to zero", []string{"run", "--headless", "--time-scale", "1e-300"},
			"--interval 500ms × --time-scale 1e-300 rounds to zero, as every duration does at this scale"},
		{"a bound rounds to zero", []string{"run", "--headless", "--bound-faulted-max", "1ns", "--time-scale", "0.5"},
			"--bound-faulted-max 1ns × --time-scale 0.5 rounds to zero: at this scale a duration must be at least 2ns"},
		{"a restart rounds to zero", []string{"run", "--headless", "--restart-length", "3ns", "--time-scale", "0.1"},
			"--restart-length 3ns × --time-scale 0.1 rounds to zero: at this scale a duration must be at least 10ns"},
		{"a timeline step's length overflows", []string{"run", "--headless", "--timeline", "at 1s stall source-0 for 2000000h", "--time-scale", "4"},
			`timeline step "at 1s stall source-0 for 2000000h0m0s": for 2000000h0m0s × --time-scale 4 overflows`},
		{"a timeline step's length rounds to zero", []string{"run", "--headless", "--timeline", "at 1s stall source-0 for 1ns", "--time-scale", "0.5"},
			`timeline step "at 1s stall source-0 for 1ns": for 1ns × --time-scale 0.5 rounds to zero`},
		{"a fault whose run ends past the longest duration", []string{"run", "--headless", "--case", "stall", "--fault-at", "2000000h", "--stall-for", "600000h"},
			`timeline step "at 2000000h0m0s stall source-0 for 600000h0m0s" × --time-scale 1: the step and the run after it (--recovery 25s, --stall-for 600000h0m0s) end past the longest duration`},
		{"a nemesis length overflows", []string{"run", "--headless", "--nemesis", "random", "--duration", "1h", "--nemesis-length", "2000000h", "--time-scale", "4"},
			"--nemesis-length 2000000h0m0s × --time-scale 4 overflows"},
		{"a swept timeout overflows", []string{"slice", "--sweep", "sim-lookup-timeout=1s,2000000h", "--time-scale", "4"},
			"--sweep sim-lookup-timeout: value 2000000h × --time-scale 4 overflows"},
		{"a simulated engine's timeout rounds to zero", []string{"run", "--headless", "--engine-arg=--sim-heartbeat-interval=1ns", "--time-scale", "0.5"},
			"--time-scale 0.5: the simulated sources' timeouts do not scale to it: --sim-time-scale 0.5: engine config: heartbeat interval 0s must be positive"},
		{"the decoder's", []string{"run", "--headless", "--decoder-arg=--sim-lookup-hold=1ns", "--time-scale", "0.5"},
			"--time-scale 0.5: the simulated decoder's timeouts do not scale to it: --sim-time-scale 0.5: engine config: lookup hold 0s must be positive"},
		{"duration 0 is no default", []string{"run", "--headless", "--duration", "0"},
			"--duration 0s: want a positive duration (leave it out for the default: 30s headless for case none, until q on the dashboard)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append(append([]string{}, tt.args...), "--engine", "virtual", "--out", out)
			var stdout, stderr bytes.Buffer
			code := cli.Main(args, strings.NewReader(""), &stdout, &stderr)
			if code != 2 {
				t.Fatalf("p2pfault %s: exit %d, want 2\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout.String(), stderr.String())
			}
			if want := "p2pfault: " + tt.want; !strings.HasPrefix(stderr.String(), want) {
				t.Errorf("stderr %q, want it to start %q", stderr.String(), want)
			}
			if n := strings.Count(stderr.String(), "\n"); n != 1 || stdout.Len() != 0 {
				t.Errorf("said %d lines on stderr and %q on stdout, want one line and nothing", n, stdout.String())
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a usage error left the output folder %s behind", out)
			}
		})
	}
}
