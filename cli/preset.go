package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"p2pfault/fault"
	"p2pfault/runner"
)

// applyPreset gives the cluster what case caseName's preset needs and the
// user did not set (fault.CasePreset): --source-dp and --mode unless given
// (or an attach file describes the cluster), and on the simulated engines
// the build's settings unless an extra argument already names their flag.
// It returns a line saying what it applied, "" when nothing.
func (f *clusterFlags) applyPreset(fs *pflag.FlagSet, caseName string) string {
	k, ok := fault.CaseKind(caseName)
	if !ok || k.Preset == nil {
		return ""
	}
	p := k.Preset
	var did []string
	if p.SourceDP > 0 && f.attach == "" && !fs.Changed("source-dp") {
		f.sourceDP = p.SourceDP
		did = append(did, fmt.Sprintf("--source-dp %d", p.SourceDP))
	}
	if p.Mode != "" && f.attach == "" && !fs.Changed("mode") {
		f.mode = p.Mode
		did = append(did, "--mode "+p.Mode)
	}
	if f.attach == "" && f.engine != runner.EngineVLLM {
		for _, a := range p.SimDecoderArgs {
			if !namesFlag(a, f.engineArgs, f.decoderArgs) {
				f.decoderArgs = append(f.decoderArgs, a)
				did = append(did, "--decoder-arg="+a)
			}
		}
		for _, a := range p.SimSourceArgs {
			if !namesFlag(a, f.engineArgs, f.sourceArgs) {
				f.sourceArgs = append(f.sourceArgs, a)
				did = append(did, "--source-arg="+a)
			}
		}
	}
	if len(did) == 0 {
		return ""
	}
	return fmt.Sprintf("case %s: %s (%s; give any of them to change it)", caseName, strings.Join(did, " "), p.Why)
}

// namesFlag reports whether any word of the lists sets the flag that word
// a ("--flag=value") sets, as "--flag=..." or "--flag" followed by a value.
func namesFlag(a string, lists ...[]string) bool {
	name, _, _ := strings.Cut(a, "=")
	for _, l := range lists {
		if slices.ContainsFunc(l, func(w string) bool { return w == name || strings.HasPrefix(w, name+"=") }) {
			return true
		}
	}
	return false
}
