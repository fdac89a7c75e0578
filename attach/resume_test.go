package attach

import (
	"slices"
	"strings"
	"testing"
)

// TestResumeCommandComesFromTheFile: cleanup --attach takes a stall's
// resume argv from the file, filled in for the source (and the rank of a
// stall of one rank); a source without one, or not in the file, is an
// error saying so.
func TestResumeCommandComesFromTheFile(t *testing.T) {
	f, err := Parse("a.yaml", []byte(`model: m
decoder: {url: 'http://10.0.0.1:8200'}
sources:
  - name: pod-a
    url: http://10.0.0.2:8100
    p2p: 10.0.0.2:7777
    ranks: 2
    faults:
      stall: [kubectl, exec, "{name}", --, stop, "{rank}"]
      resume: [kubectl, exec, "{name}", --, cont, "{p2p_port}", "{rank}"]
  - {name: pod-b, url: 'http://10.0.0.3:8100', p2p: '10.0.0.3:7777', faults: {kill: [kubectl, delete, "{name}"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		stall string
		want  []string
		err   string
	}{
		{stall: "pod-a", want: []string{"kubectl", "exec", "pod-a", "--", "cont", "7777", ""}},
		{stall: "pod-a/rank1", want: []string{"kubectl", "exec", "pod-a", "--", "cont", "7778", "1"}},
		{stall: "pod-b", err: "pod-b has no resume command in a.yaml (line 11): resume it by hand"},
		{stall: "pod-c", err: "a.yaml names no source pod-c: give the attach file the run used"},
		{stall: "pod-a/rankx", err: `stall "pod-a/rankx": not a source's name or NAME/rankN`},
	} {
		got, err := f.ResumeCommand(tt.stall)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %q %v, want error %q", tt.stall, got, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q %v, want %q", tt.stall, got, err, tt.want)
		}
	}
}
