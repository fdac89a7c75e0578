package report

import (
	"strings"
	"testing"
)

// A row whose only window could not be judged reads "not judged" in the
// seed's table, not FAIL, and report.md says why; a row with a failed
// check as well still reads FAIL.
func TestARowNotJudgedSaysSoAndWhy(t *testing.T) {
	reason := "window 1 (stall source-0 at 10.0s): source-0's baseline had stopped hitting before its fault fired: its last 3 pulls that ended before 10.0s missed (the last at 9.5s)"
	notJudged := Row{Arm: "main", Mode: "p2p", Case: "stall", NotJudged: []string{reason},
		Checks: []CheckRow{{Name: "all_200", Passed: true, Detail: "all 40 returned 200"}}}
	failed := notJudged
	failed.Arm = "fixed"
	failed.Checks = []CheckRow{{Name: "all_200", Passed: false, Detail: "3 of 40 did not return 200"}}
	var b strings.Builder
	if err := WriteMarkdown(&b, notJudged, failed); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| main | stall | not judged |",
		"| fixed | stall | FAIL |",
		"**main / stall** could not be judged on every window:\n\n```\n" + reason + "\n```",
		"**fixed / stall** failed:",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "**main / stall** failed") {
		t.Errorf("the row not judged is written as failed:\n%s", md)
	}
}
