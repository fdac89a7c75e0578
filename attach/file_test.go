package attach

import (
	"slices"
	"strings"
	"testing"

	"p2pfault/exitcode"
	"p2pfault/fault"
)

// issueExample is the attach file of issue 14, verbatim.
const issueExample = `model: meta-llama/Llama-3.2-1B-Instruct
decoder:
  url: http://127.0.0.1:8200
sources:
  - name: source-0
    url: http://127.0.0.1:8100
    p2p: 127.0.0.1:7777
    faults: local
  - name: source-1
    url: http://source-1.llm-d.svc:8100
    p2p: source-1.llm-d.svc:7777
    faults:
      stall: [kubectl, exec, -n, llm-d, "{name}", --, sh, -c, "kill -STOP -1; kill -STOP 1"]
      resume: [kubectl, exec, -n, llm-d, "{name}", --, sh, -c, "kill -CONT 1; kill -CONT -1"]
      kill: [kubectl, delete, pod, -n, llm-d, "{name}", --grace-period=0, --force]
restore_at_end: false
`

func TestParseIssueExample(t *testing.T) {
	f, err := Parse("a.yaml", []byte(issueExample))
	if err != nil {
		t.Fatal(err)
	}
	if f.Model != "meta-llama/Llama-3.2-1B-Instruct" || f.Decoder.Port != 8200 || f.Decoder.Host != "127.0.0.1" || f.RestoreAtEnd {
		t.Errorf("file %+v", f)
	}
	if len(f.Sources) != 2 {
		t.Fatalf("sources %+v", f.Sources)
	}
	s0, s1 := f.Sources[0], f.Sources[1]
	if !s0.Faults.Local || s0.P2PPort != 7777 || s0.Port != 8100 || s0.Line != 5 {
		t.Errorf("source-0 %+v", s0)
	}
	if s1.Faults.Local || len(s1.Faults.Commands) != 3 || s1.Host != "source-1.llm-d.svc" || s1.P2PHost != "source-1.llm-d.svc" {
		t.Errorf("source-1 %+v", s1)
	}
	got := s1.Fill(s1.Faults.Commands[fault.ActionKill], fault.Grain{})
	want := []string{"kubectl", "delete", "pod", "-n", "llm-d", "source-1", "--grace-period=0", "--force"}
	if !slices.Equal(got, want) {
		t.Errorf("kill filled %q, want %q", got, want)
	}
	if got := s1.Faults.Commands[fault.ActionStall][8]; got != "kill -STOP -1; kill -STOP 1" {
		t.Errorf("stall's shell word %q", got)
	}
}

func TestParseDefaultsLocalOnLoopbackOnly(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "localhost", "[::1]"} {
		f, err := Parse("a.yaml", []byte("model: m\ndecoder: {url: 'http://"+host+":8200'}\nsources:\n  - {name: s, url: 'http://"+host+":8100', p2p: '"+host+":7777'}\n"))
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if !f.Sources[0].Faults.Local {
			t.Errorf("%s: not local by default", host)
		}
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	base := func(src string) string {
		return "model: m\ndecoder:\n  url: http://127.0.0.1:8200\nsources:\n" + src
	}
	cases := []struct{ name, file, want string }{
		{"unknown top key", "model: m\nmodle: x\n", `a.yaml:2: unknown field "modle"`},
		{"unknown source key", base("  - name: s\n    url: http://127.0.0.1:8100\n    p2p: 127.0.0.1:7777\n    port: 3\n"), `a.yaml:8: unknown field "port"`},
		{"bad decoder url", "model: m\ndecoder:\n  url: ftp://x:1\nsources: []\n", `a.yaml:3: decoder.url "ftp://x:1": want http://HOST:PORT`},
		{"bad decoder p2p", "model: m\ndecoder:\n  url: http://127.0.0.1:8200\n  p2p: 127.0.0.1\nsources:\n  - {name: s, url: 'http://127.0.0.1:1', p2p: '127.0.0.1:2'}\n", `a.yaml:4: decoder.p2p "127.0.0.1": want HOST:PORT`},
		{"url with path", base("  - {name: s, url: 'http://h:1/v1', p2p: 'h:2'}\n"), `a.yaml:5: source s: url "http://h:1/v1": want only scheme, host and port`},
		{"url bad port", base("  - {name: s, url: 'http://h:99999', p2p: 'h:2'}\n"), `a.yaml:5: source s: url "http://h:99999"`},
		{"bad p2p", base("  - name: s\n    url: http://127.0.0.1:8100\n    p2p: 127.0.0.1\n"), `a.yaml:7: source s: p2p "127.0.0.1": want HOST:PORT`},
		{"p2p port range", base("  - name: s\n    url: http://127.0.0.1:8100\n    p2p: 127.0.0.1:0\n"), `a.yaml:7: source s: p2p "127.0.0.1:0": port "0": want 1-65535`},
		{"missing p2p", base("  - name: s\n    url: http://127.0.0.1:8100\n"), `a.yaml:5: source s: p2p: missing`},
		{"missing model", "decoder:\n  url: http://127.0.0.1:8200\n", `a.yaml: model: missing`},
		{"no sources", "model: m\ndecoder:\n  url: http://127.0.0.1:8200\n", `sources: want at least one source`},
		{"duplicate name", base("  - {name: s, url: 'http://127.0.0.1:1', p2p: '127.0.0.1:2'}\n  - {name: s, url: 'http://127.0.0.1:3', p2p: '127.0.0.1:4'}\n"), `a.yaml:6: source s: name given to sources[0] too`},
		{"remote needs commands", base("  - {name: s, url: 'http://s.svc:1', p2p: 's.svc:2'}\n"), `a.yaml:5: source s: faults: missing; a source not on this host (s.svc) needs commands`},
		{"faults word", base("  - name: s\n    url: http://127.0.0.1:1\n    p2p: 127.0.0.1:2\n    faults: remote\n"), "a.yaml:8: faults: want `local` or a map"},
		{"unknown action", base("  - name: s\n    url: http://127.0.0.1:1\n    p2p: 127.0.0.1:2\n    faults:\n      pause: [true]\n"), `a.yaml:9: faults: unknown action "pause"`},
		{"command not a list", base("  - name: s\n    url: http://127.0.0.1:1\n    p2p: 127.0.0.1:2\n    faults:\n      kill: kubectl delete pod\n"), `a.yaml:9: faults.kill: want a list of words`},
		{"unknown placeholder", base("  - name: s\n    url: http://127.0.0.1:1\n    p2p: 127.0.0.1:2\n    faults:\n      kill: [ssh, h, kill, \"{pid}\"]\n"), `a.yaml:9: faults.kill: unknown placeholder {pid}`},
		{"stall without resume", base("  - name: s\n    url: http://127.0.0.1:1\n    p2p: 127.0.0.1:2\n    faults:\n      stall: [x]\n"), `a.yaml:9: source s: faults: a stall command needs a resume command`},
		{"no commands", base("  - name: s\n    url: http://127.0.0.1:1\n    p2p: 127.0.0.1:2\n    faults: {}\n"), `a.yaml:8: source s: faults: no commands`},
		{"bad bool", "model: m\nrestore_at_end: maybe\n", `a.yaml:2:`},
		{"syntax", "model: [m\n", `a.yaml:`},
		{"decoder panic", "model: m\nsources:\n  ! #x\n", `a.yaml: not a valid attach file`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("a.yaml", []byte(c.file))
			if err == nil {
				t.Fatalf("accepted:\n%s", c.file)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\nwant it to contain %q", err, c.want)
			}
			if exitcode.Code(err) != exitcode.Usage {
				t.Errorf("exit code %d, want 2", exitcode.Code(err))
			}
		})
	}
}

func TestParseKeepsJSONPathBraces(t *testing.T) {
	f, err := Parse("a.yaml", []byte("model: m\ndecoder: {url: 'http://127.0.0.1:1'}\nsources:\n  - name: s\n    url: http://127.0.0.1:2\n    p2p: 127.0.0.1:3\n    faults:\n      ready: [kubectl, get, pod, \"{name}\", -o, \"jsonpath={.status.phase}\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := f.Sources[0].Fill(f.Sources[0].Faults.Commands[fault.ActionReady], fault.Grain{})
	if got[3] != "s" || got[5] != "jsonpath={.status.phase}" {
		t.Errorf("filled %q", got)
	}
}

// FuzzParse: no input makes Parse panic, and a file it accepts is whole.
func FuzzParse(f *testing.F) {
	f.Add([]byte(issueExample))
	f.Add([]byte("model: m\ndecoder: {url: 'http://[::1]:1'}\nsources:\n  - {name: s, url: 'http://localhost:2', p2p: '[::1]:3', faults: {ready: [a, '{name}']}}\n"))
	f.Add([]byte("model: m\nsources:\n  - faults: local\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("f.yaml", data)
		if err != nil {
			if exitcode.Code(err) != exitcode.Usage || !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error %q (code %d) does not name the file as a usage error", err, exitcode.Code(err))
			}
			return
		}
		if file.Model == "" || file.Decoder.Port < 1 || len(file.Sources) == 0 {
			t.Fatalf("accepted %+v", file)
		}
		for _, s := range file.Sources {
			if s.Name == "" || s.P2PPort < 1 || s.P2PPort > 65535 || s.Port < 1 || (s.Faults.Local == (len(s.Faults.Commands) > 0)) {
				t.Fatalf("accepted source %+v", s)
			}
			for a, argv := range s.Faults.Commands {
				if len(argv) == 0 || argv[0] == "" || !slices.Contains(Actions(), a) {
					t.Fatalf("accepted command %s %q", a, argv)
				}
			}
		}
	})
}

// TestRanksOfAnAttachedSource: `ranks: N` gives a source N data-parallel
// ranks (its P2P ports base..base+N-1), which the plan says and the probe
// pins trials to; a bad count is a usage error naming its line; a timeline
// step on one rank of a source of one rank is refused before the run
// (rank_test.go: the steps of one rank a source takes).
func TestRanksOfAnAttachedSource(t *testing.T) {
	file := "model: m\ndecoder:\n  url: http://127.0.0.1:8200\nsources:\n" +
		"  - {name: s0, url: 'http://127.0.0.1:8100', p2p: '127.0.0.1:7777', ranks: 2}\n" +
		"  - {name: s1, url: 'http://127.0.0.1:8101', p2p: '127.0.0.1:7779'}\n"
	f, err := Parse("a.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if f.Sources[0].Ranks != 2 || f.Sources[1].Ranks != 0 {
		t.Fatalf("ranks %d, %d; want 2 and none", f.Sources[0].Ranks, f.Sources[1].Ranks)
	}
	c := &Cluster{file: f}
	for i := range f.Sources {
		c.sources = append(c.sources, newTarget(f.Sources[i], Options{}.withDefaults(), "source", i))
	}
	tl, err := fault.Parse("at 1s stall source-1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Plan(tl)
	if err != nil || !slices.Equal(p.Ranks, []int{2, 1}) {
		t.Errorf("plan ranks %v (%v), want [2 1]", p.Ranks, err)
	}
	tl, err = fault.Parse("at 1s stall source-1/rank0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Plan(tl); err == nil || exitcode.Code(err) != exitcode.Usage || !strings.Contains(err.Error(), "s1 has one data-parallel rank (the attach file gives it no `ranks: N`)") {
		t.Errorf("a rank's stall on an attached source of one rank: %v", err)
	}
	bad := strings.Replace(file, "ranks: 2", "ranks: 99", 1)
	if _, err := Parse("a.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "a.yaml:5: source s0: ranks 99: want 1 to 16") {
		t.Errorf("ranks 99: %v", err)
	}
}

// twoDecoders is an attach file of two decoders, each listed as a source
// is: one faulted locally, one by commands.
const twoDecoders = `model: meta-llama/Llama-3.2-1B-Instruct
decoders:
  - name: decode-a
    url: http://127.0.0.1:8200
    p2p: 127.0.0.1:7790
  - name: decode-b
    url: http://decode-b.llm-d.svc:8200
    p2p: decode-b.llm-d.svc:7777
    faults:
      stall: [kubectl, exec, "{name}", --, kill, -STOP, "1"]
      resume: [kubectl, exec, "{name}", --, kill, -CONT, "1"]
      kill: [kubectl, delete, pod, "{name}"]
sources:
  - name: source-0
    url: http://127.0.0.1:8100
    p2p: 127.0.0.1:7777
`

// TestParseTwoDecoders: `decoders:` lists each decoder with its address
// and faults, as a source's entry; the first is the file's Decoder. Giving
// both `decoder` and `decoders`, a decoder with ranks, a name a source
// has, or a stall without its resume is an error naming the entry.
func TestParseTwoDecoders(t *testing.T) {
	f, err := Parse("a.yaml", []byte(twoDecoders))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Decoders) != 2 || f.Decoder != f.Decoders[0].Endpoint || f.Decoder.Port != 8200 {
		t.Fatalf("decoders %+v, decoder %+v", f.Decoders, f.Decoder)
	}
	a, b := f.Decoders[0], f.Decoders[1]
	if a.Name != "decode-a" || !a.Faults.Local || a.P2PPort != 7790 {
		t.Errorf("decoders[0] %+v: want decode-a, local faults, p2p port 7790", a)
	}
	if b.Faults.Local || !slices.Equal(b.Fill(b.Faults.Commands[fault.ActionKill], fault.Grain{}), []string{"kubectl", "delete", "pod", "decode-b"}) {
		t.Errorf("decoders[1] %+v: want its kill command with {name} filled", b)
	}
	for _, c := range []struct{ old, new, want string }{
		{"decoders:\n", "decoder:\n  url: http://127.0.0.1:8201\ndecoders:\n", "give one decoder (decoder.url) or a list (decoders), not both"},
		{"    p2p: 127.0.0.1:7790\n", "    p2p: 127.0.0.1:7790\n    ranks: 2\n", "decoders[0]: ranks 2: a decoder has one rank here"},
		{"name: decode-a", "name: source-0", "decoder source-0: name given to sources[0] too"},
		{"decoders:\n", "decoders:\n  - name: decode-b\n    url: http://127.0.0.1:8201\n    p2p: 127.0.0.1:7791\n", "decoder decode-b: name given to decoders[0] too"},
		{"      resume: [kubectl, exec, \"{name}\", --, kill, -CONT, \"1\"]\n", "", "decoder decode-b: faults: a stall command needs a resume command"},
	} {
		_, err := Parse("a.yaml", []byte(strings.Replace(twoDecoders, c.old, c.new, 1)))
		if err == nil || !strings.Contains(err.Error(), c.want) || exitcode.Code(err) != exitcode.Usage {
			t.Errorf("%q: %v, want a usage error saying %q", c.want, err, c.want)
		}
	}
}

// TestTheDecodersP2PAddressIsWhatLinksNeed: the one `decoder:` may give
// its P2P address (decoder.p2p); without it the cluster plans no links
// (Plan.NoLinks names the missing key: the links stand in for each side
// to the other, so they must know the decoder's identity), with it the
// decoder's target carries it and links may be made.
func TestTheDecodersP2PAddressIsWhatLinksNeed(t *testing.T) {
	for _, tc := range []struct {
		p2p     string
		noLinks bool
	}{{"", true}, {"  p2p: 127.0.0.1:7779\n", false}} {
		file := "model: m\ndecoder:\n  url: http://127.0.0.1:8200\n" + tc.p2p + "sources:\n  - {name: s0, url: 'http://127.0.0.1:8100', p2p: '127.0.0.1:7777'}\n"
		f, err := Parse("a.yaml", []byte(file))
		if err != nil {
			t.Fatal(err)
		}
		c := newCluster(f, Options{}.withDefaults())
		p, err := c.Plan(nil)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.noLinks && !strings.Contains(p.NoLinks, "a.yaml: decoder.p2p: missing"):
			t.Errorf("no decoder.p2p: NoLinks %q, want it to name decoder.p2p", p.NoLinks)
		case !tc.noLinks && (p.NoLinks != "" || c.Decoder().P2PPort() != 7779 || c.Decoder().P2PHost() != "127.0.0.1"):
			t.Errorf("decoder.p2p 127.0.0.1:7779: NoLinks %q, decoder P2P %s:%d", p.NoLinks, c.Decoder().P2PHost(), c.Decoder().P2PPort())
		}
	}
}
