package engineargs

import (
	"strings"
	"testing"
)

func TestValueReadsBothSpellingsAndTheLastWins(t *testing.T) {
	for _, tt := range []struct {
		argv []string
		want int
		err  string
	}{
		{[]string{"vllm", "serve", "m", "--port", "8000"}, 1, ""},
		{[]string{"vllm", "serve", "m", "--data-parallel-size", "4"}, 4, ""},
		{[]string{"vllm", "serve", "m", "--data-parallel-size=2"}, 2, ""},
		{[]string{"vllm", "serve", "m", "-dp", "3"}, 3, ""},
		{[]string{"vllm", "serve", "m", "--data-parallel-size", "2", "-dp=8"}, 8, ""},
		{[]string{"vllm", "serve", "m", "--", "--data-parallel-size", "2"}, 1, ""},
		{[]string{"vllm", "serve", "m", "--data-parallel-size"}, 1, ""}, // no value: argparse's error, not ours
		{[]string{"vllm", "serve", "m", "--data-parallel-size", "two"}, 0, `--data-parallel-size "two"`},
		{[]string{"vllm", "serve", "m", "--data-parallel-size=0"}, 0, `--data-parallel-size "0"`},
	} {
		n, err := Int(tt.argv, 1, DataParallelSize...)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: %d, %v; want an error naming %s", tt.argv, n, err, tt.err)
			}
			continue
		}
		if err != nil || n != tt.want {
			t.Errorf("%q: %d, %v; want %d", tt.argv, n, err, tt.want)
		}
	}
}
