package cli_test

import (
	"strings"
	"testing"
	"testing/synctest"

	"p2pfault/exitcode"
)

// A cluster whose decoder runs with another block size never engages its
// P2P tier: the decoder's log rejects each source's connect (vLLM's
// protocol error on a block_len mismatch), and the run ends at the
// warm-up as one that cannot be judged (exit 3, not a usage error), with
// the cause named and what to fix.
func TestAMisconfiguredClusterIsNotJudgedAndSaysWhy(t *testing.T) {
	var r virtualRun
	out := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		r = runVirtual(t, "run", "--case", "stall", "--headless", "--sources", "1",
			"--decoder-arg=--block-size=64", "--warmup-timeout", "5s", "--out", out)
	})
	t.Logf("stderr:\n%s", r.stderr)
	if r.code != exitcode.NotJudged {
		t.Fatalf("exit %d, want %d (not judged)\nstdout:\n%s\nstderr:\n%s", r.code, exitcode.NotJudged, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"P2P never engaged, so the run cannot be judged",
		"source 0 (P2P 127.0.0.1:7777) not handshaken within 5s",
		"cause (rejected): the decoder's log rejects source-0's connect (block_len mismatch from 127.0.0.1:7777: remote=",
		"give every engine the same --block-size",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}
