package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"p2pfault/cli"
)

// TestFlagErrorNamesTheCommandOnce: a bad flag's message is printed after
// "p2pfault: " and names the subcommand alone, never "p2pfault: p2pfault".
func TestFlagErrorNamesTheCommandOnce(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "p2pfault: unknown flag: --bogus (see `p2pfault --help`)\n"},
		{[]string{"run", "--bogus"}, "p2pfault: run: unknown flag: --bogus (see `p2pfault run --help`)\n"},
		{[]string{"sim", "serve", "m", "--bogus"}, "p2pfault: sim serve: unknown flag: --bogus (see `p2pfault sim serve --help`)\n"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := cli.Main(tt.args, strings.NewReader(""), &stdout, &stderr)
		if code != 2 || stderr.String() != tt.want {
			t.Errorf("p2pfault %s: exit %d, stderr %q; want exit 2, %q", strings.Join(tt.args, " "), code, stderr.String(), tt.want)
		}
	}
}
