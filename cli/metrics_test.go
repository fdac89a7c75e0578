package cli_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"p2pfault/cli"
)

// TestMetricsListenUsageErrors: a --metrics-listen that is not PORT or
// HOST:PORT, or an address already taken, ends run and slice with exit 2
// naming the flag, before any engine starts and with no output folder.
func TestMetricsListenUsageErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, cmd := range []string{"run", "slice"} {
		for _, value := range []string{"", "http", "127.0.0.1:99999", "host:", taken.Addr().String()} {
			out := filepath.Join(t.TempDir(), "out")
			args := []string{cmd, "--metrics-listen", value, "--out", out}
			if cmd == "run" {
				args = append(args, "--headless")
			}
			var stdout, stderr bytes.Buffer
			code := cli.Main(args, strings.NewReader(""), &stdout, &stderr)
			if code != 2 {
				t.Errorf("p2pfault %s: exit %d, want 2\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, stdout.String(), stderr.String())
				continue
			}
			if want := `--metrics-listen "` + value + `"`; !strings.Contains(stderr.String(), want) {
				t.Errorf("p2pfault %s: stderr %q does not name %s", strings.Join(args, " "), stderr.String(), want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("p2pfault %s: the usage error left %s behind", strings.Join(args, " "), out)
			}
		}
	}
}
