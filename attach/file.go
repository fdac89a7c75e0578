// Package attach drives a cluster p2pfault did not start: engines someone
// already runs, described by an attach file. It reads and checks the file,
// finds local engines through /proc and faults each source either locally
// (signals to its whole session or to one data-parallel rank's processes,
// restart from its /proc command line) or through the commands the file
// gives (kubectl, ssh; {rank} for one rank: rank.go), and leaves the
// cluster as found: every stall is resumed on every way out, through a
// guard process (package guard) when p2pfault itself is killed.
package attach

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"p2pfault/runner"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
)

// File is an attach file, checked.
type File struct {
	Path  string // where it was read from, for messages
	Model string
	// Mode is the leg of the tier the engines are run for, event.ModeP2P
	// or event.ModePD ("" when the file says none): a run on the file
	// probes in this mode unless --mode (or slice's --modes) says otherwise.
	Mode    string
	Decoder Endpoint // the first decoder's
	// DecoderP2P is the one `decoder:`'s P2P address (decoder.p2p: the
	// host:port its kv-transfer-config binds, its identity to the
	// sources), zero when the file gives none: a run's links need it
	// (they stand in for each source to the decoder and for the decoder
	// to each source).
	DecoderP2P HostPort
	// Decoders are the `decoders:` entries, each a decoder faulted as a
	// source is (issue #41); none when the file gives one `decoder:`,
	// which is probed and watched, never faulted.
	Decoders     []Source
	Sources      []Source
	RestoreAtEnd bool
	// Kubernetes is the file's `kubernetes:` block (kubefile.go): then
	// it lists no sources or decoders, and run and slice take it as
	// --kube's flags; nil without one.
	Kubernetes *Kubernetes
}

// HostPort is a P2P address; Port 0 is none.
type HostPort struct {
	Host string
	Port int
}

// Endpoint is an engine's HTTP address.
type Endpoint struct {
	URL  string // as written, e.g. http://127.0.0.1:8200
	Host string // the URL's host, without brackets
	Port int    // the URL's port (80/443 by default)
}

// Source is one source engine of the file.
type Source struct {
	Name string
	Endpoint
	P2P     string // host:port the decoder is told (remote_host/remote_port)
	P2PHost string
	P2PPort int
	// Ranks is the source's data-parallel size (`ranks: N`; 0 or 1: one):
	// rank r listens for P2P at P2PPort + r, and the probe pins trials to
	// each rank in turn.
	Ranks  int
	Faults Faults
	Line   int // the line of the source's entry, for later messages
}

// Faults says how a source is faulted: locally, or by a command per action
// (a fault kind's name, or fault.ActionReady).
type Faults struct {
	Local    bool
	Commands map[string][]string // argv per action, placeholders unfilled
}

// Placeholders in a command's words, filled in per source.
const (
	PlaceholderName    = "{name}"
	PlaceholderHost    = "{host}"     // the URL's host
	PlaceholderPort    = "{port}"     // the URL's port
	PlaceholderP2PHost = "{p2p_host}" // the P2P address's host
	PlaceholderP2PPort = "{p2p_port}" // the P2P port: one rank's own (base + rank) on a step of one rank
	// PlaceholderRank is the rank a step of one data-parallel rank acts on
	// (source-0/rank1: 1). A command that holds it acts on one rank: a
	// step of one rank runs it, a step on the whole source does not
	// (Source.rankRefusal).
	PlaceholderRank = "{rank}"
)

var placeholders = []string{PlaceholderName, PlaceholderHost, PlaceholderPort, PlaceholderP2PHost, PlaceholderP2PPort, PlaceholderRank}

// placeholderLike finds words that look like a placeholder, so a typo
// ({p2pport}) is an error rather than a literal; braces with other content
// (kubectl's jsonpath {.status.phase}) are left alone.
var placeholderLike = regexp.MustCompile(`\{[a-z][a-z0-9_]*\}`)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// The file as decoded, before checks.
type rawFile struct {
	Model   string `yaml:"model"`
	Mode    string `yaml:"mode"`
	Decoder struct {
		URL string `yaml:"url"`
		P2P string `yaml:"p2p"`
	} `yaml:"decoder"`
	// Decoders lists several decoders, each an entry of a source's shape
	// (its faults too), in place of Decoder.
	Decoders     []rawSource `yaml:"decoders"`
	Sources      []rawSource `yaml:"sources"`
	RestoreAtEnd bool        `yaml:"restore_at_end"`
	Kubernetes   *rawKube    `yaml:"kubernetes"` // kubefile.go
}

type rawSource struct {
	Name   string    `yaml:"name"`
	URL    string    `yaml:"url"`
	P2P    string    `yaml:"p2p"`
	Ranks  int       `yaml:"ranks"`
	Faults rawFaults `yaml:"faults"`
}

// rawFaults is `local` or a map of action to argv. It decodes from the
// node itself so that its errors carry the line.
type rawFaults struct {
	set      bool
	local    bool
	commands map[string][]string
	line     int
}

func (f *rawFaults) UnmarshalYAML(n ast.Node) error {
	f.set, f.line = true, line(n)
	switch n := n.(type) {
	case *ast.StringNode:
		if n.Value != "local" {
			return lineErrorf(n, "faults: want `local` or a map of action to command, got %q", n.Value)
		}
		f.local = true
		return nil
	case *ast.MappingNode:
		f.commands = map[string][]string{}
		for _, kv := range n.Values {
			key := kv.Key.String()
			if !isAction(key) {
				return lineErrorf(kv.Key, "faults: unknown action %q (want %s)", key, actionList())
			}
			if _, dup := f.commands[key]; dup {
				return lineErrorf(kv.Key, "faults: action %q given twice", key)
			}
			seq, ok := kv.Value.(*ast.SequenceNode)
			if !ok {
				return lineErrorf(kv.Value, "faults.%s: want a list of words, e.g. [kubectl, delete, pod, \"{name}\"]", key)
			}
			var argv []string
			for _, w := range seq.Values {
				s, ok := scalar(w)
				if !ok {
					return lineErrorf(w, "faults.%s: want a word, got a %s", key, w.Type())
				}
				for _, ph := range placeholderLike.FindAllString(s, -1) {
					if !slices.Contains(placeholders, ph) {
						return lineErrorf(w, "faults.%s: unknown placeholder %s (want %s)", key, ph, strings.Join(placeholders, ", "))
					}
					if ph == PlaceholderRank && wholeOnly(key) {
						return lineErrorf(w, "faults.%s: %s: the %s command acts on the whole engine (one rank's kill or removal ends all of it, as vLLM does), so it takes no rank", key, ph, key)
					}
				}
				argv = append(argv, s)
			}
			if len(argv) == 0 || argv[0] == "" {
				return lineErrorf(kv.Value, "faults.%s: empty command", key)
			}
			f.commands[key] = argv
		}
		return nil
	case *ast.NullNode:
		f.set = false
		return nil
	default:
		return lineErrorf(n, "faults: want `local` or a map of action to command, got a %s", n.Type())
	}
}

// scalar returns the text of a string, number or boolean node.
func scalar(n ast.Node) (string, bool) {
	switch n := n.(type) {
	case *ast.StringNode:
		return n.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return n.GetToken().Value, true
	}
	return "", false
}

func line(n ast.Node) int {
	if n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

// lineError is a bad value at a line of the file.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return e.msg }

func lineErrorf(n ast.Node, format string, a ...any) error {
	return &lineError{line: line(n), msg: fmt.Sprintf(format, a...)}
}

// Load reads and checks the attach file at path. Every error is a usage
// error (exit 2) naming the file and, where there is one, the line.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, exitcode.AsUsage(fmt.Errorf("attach file: %w", err))
	}
	return Parse(path, data)
}

// Parse checks an attach file's content; name is used in messages.
func Parse(name string, data []byte) (f *File, err error) {
	defer func() {
		// The syntax-tree lookups go through go-yaml too (see decode).
		if r := recover(); r != nil {
			f, err = nil, exitcode.AsUsage(fmt.Errorf("%s: not a valid attach file (the YAML parser failed: %v)", name, r))
		}
	}()
	var raw rawFile
	if err := decode(data, &raw); err != nil {
		return nil, exitcode.AsUsage(fmt.Errorf("%s", formatYAMLError(name, err)))
	}
	// A second parse to the syntax tree, to name the line of a bad value
	// found by the checks below.
	tree, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, exitcode.AsUsage(fmt.Errorf("%s", formatYAMLError(name, err)))
	}
	c := fileChecker{name: name, tree: tree}
	if raw.Kubernetes != nil {
		return c.kubernetes(raw)
	}
	f = &File{Path: name, Model: raw.Model, Mode: raw.Mode, RestoreAtEnd: raw.RestoreAtEnd}
	if f.Decoder, err = c.header(raw); err != nil {
		return nil, err
	}
	if raw.Decoder.P2P != "" {
		if f.DecoderP2P.Host, f.DecoderP2P.Port, err = parseHostPort(raw.Decoder.P2P); err != nil {
			return nil, c.bad("$.decoder.p2p", "decoder.p2p %q: %v", raw.Decoder.P2P, err)
		}
	}
	seen := map[string]string{}
	for i, rs := range raw.Sources {
		s, err := c.source(i, rs, seen)
		if err != nil {
			return nil, err
		}
		f.Sources = append(f.Sources, s)
	}
	for i, rs := range raw.Decoders {
		d, err := c.decoder(i, rs, seen)
		if err != nil {
			return nil, err
		}
		f.Decoders = append(f.Decoders, d)
	}
	if len(f.Decoders) > 0 {
		f.Decoder = f.Decoders[0].Endpoint
	}
	return f, nil
}

// MaxDecoders is how many `decoders:` entries a file may list, as many as
// --decoders launches.
const MaxDecoders = runner.MaxDecoders

// decoder checks the file's i-th `decoders:` entry: a source's shape (a
// name, its url, its p2p address, how it is faulted), one rank; seen
// holds the names before it, sources' too.
func (c fileChecker) decoder(i int, rs rawSource, seen map[string]string) (Source, error) {
	if rs.Ranks > 1 {
		return Source{}, c.bad(fmt.Sprintf("$.decoders[%d].ranks", i), "decoders[%d]: ranks %d: a decoder has one rank here", i, rs.Ranks)
	}
	return c.entry("decoders", "decoder", i, rs, seen)
}

// fileChecker names the file and line of a bad value found in a parsed
// attach file.
type fileChecker struct {
	name string
	tree *ast.File
}

// at is the line of the value at a YAML path ($.sources[0].url), 0 if
// the tree does not have it.
func (c fileChecker) at(path string) int { return pathLine(c.tree, path) }

// bad is a usage error at the line of path.
func (c fileChecker) bad(path, format string, a ...any) error {
	loc := c.name
	if l := c.at(path); l > 0 {
		loc = c.name + ":" + strconv.Itoa(l)
	}
	return exitcode.AsUsage(fmt.Errorf("%s: %s", loc, fmt.Sprintf(format, a...)))
}

// header checks what the file says of the whole cluster: its model, mode
// and decoder, and that it has sources.
func (c fileChecker) header(raw rawFile) (Endpoint, error) {
	if err := c.modelMode(raw); err != nil {
		return Endpoint{}, err
	}
	switch {
	case len(raw.Decoders) > 0 && raw.Decoder.URL != "":
		return Endpoint{}, c.bad("$.decoders", "decoder and decoders: give one decoder (decoder.url) or a list (decoders), not both")
	case len(raw.Decoders) > MaxDecoders:
		return Endpoint{}, c.bad("$.decoders", "decoders: %d entries, want at most %d", len(raw.Decoders), MaxDecoders)
	case len(raw.Decoders) > 0:
		// Each entry is checked as a source's is (fileChecker.decoder),
		// after the sources.
	case raw.Decoder.URL == "":
		return Endpoint{}, c.bad("$.decoder", "decoder.url: missing (or decoders: a list of decoders)")
	}
	var dec Endpoint // with decoders: the first entry's, once checked (Parse)
	if len(raw.Decoders) == 0 {
		var err error
		if dec, err = parseURL(raw.Decoder.URL); err != nil {
			return Endpoint{}, c.bad("$.decoder.url", "decoder.url %q: %v", raw.Decoder.URL, err)
		}
	}
	if len(raw.Sources) == 0 {
		return Endpoint{}, c.bad("$.sources", "sources: want at least one source")
	}
	return dec, nil
}

// modelMode checks the file's model and mode, any file's.
func (c fileChecker) modelMode(raw rawFile) error {
	if strings.TrimSpace(raw.Model) == "" {
		return c.bad("$.model", "model: missing (the model the engines serve, e.g. meta-llama/Llama-3.2-1B-Instruct)")
	}
	if event.CheckMode(raw.Mode) != nil {
		return c.bad("$.mode", "mode %q: want %s (remote_kv_source pulls) or %s (remote_decoder prefill legs, remote_prefiller decode legs)", raw.Mode, event.ModeP2P, event.ModePD)
	}
	return nil
}

// source checks the file's i-th source; seen holds the names of the ones
// before it, by index.
func (c fileChecker) source(i int, rs rawSource, seen map[string]string) (Source, error) {
	return c.entry("sources", "source", i, rs, seen)
}

// entry checks the i-th entry of list (sources, decoders), one engine
// named as one (source, decoder) in messages.
func (c fileChecker) entry(list, one string, i int, rs rawSource, seen map[string]string) (Source, error) {
	p := fmt.Sprintf("$.%s[%d]", list, i)
	what := fmt.Sprintf("%s[%d]", list, i)
	if rs.Name != "" {
		what = fmt.Sprintf("%s %s", one, rs.Name)
	}
	s := Source{Name: rs.Name, Line: c.at(p)}
	switch {
	case rs.Name == "":
		return s, c.bad(p, "%s: name: missing", what)
	case !nameRE.MatchString(rs.Name):
		return s, c.bad(p+".name", "%s: name %q: want letters, digits, '.', '_' or '-'", what, rs.Name)
	}
	if prev, dup := seen[rs.Name]; dup {
		return s, c.bad(p+".name", "%s: name given to %s too", what, prev)
	}
	seen[rs.Name] = fmt.Sprintf("%s[%d]", list, i)
	var err error
	if rs.URL == "" {
		return s, c.bad(p, "%s: url: missing", what)
	}
	if s.Endpoint, err = parseURL(rs.URL); err != nil {
		return s, c.bad(p+".url", "%s: url %q: %v", what, rs.URL, err)
	}
	if rs.P2P == "" {
		return s, c.bad(p, "%s: p2p: missing (the host:port the decoder is told as remote_host/remote_port)", what)
	}
	if s.P2PHost, s.P2PPort, err = parseHostPort(rs.P2P); err != nil {
		return s, c.bad(p+".p2p", "%s: p2p %q: %v", what, rs.P2P, err)
	}
	s.P2P = rs.P2P
	if rs.Ranks < 0 || rs.Ranks > runner.MaxSourceDP || s.P2PPort+max(rs.Ranks, 1)-1 > 65535 {
		return s, c.bad(p+".ranks", "%s: ranks %d: want 1 to %d data-parallel ranks, their P2P ports %d..%d+ranks-1 within 65535", what, rs.Ranks, runner.MaxSourceDP, s.P2PPort, s.P2PPort)
	}
	s.Ranks = rs.Ranks
	s.Faults, err = c.faults(p, what, s.Host, rs.Faults)
	return s, err
}

// faults checks how a source is faulted: locally (a loopback source may
// leave it unsaid) or by commands, a stall always with its resume.
func (c fileChecker) faults(p, what, host string, rf rawFaults) (Faults, error) {
	switch {
	case !rf.set && isLoopback(host):
		return Faults{Local: true}, nil
	case !rf.set:
		return Faults{}, c.bad(p, "%s: faults: missing; a source not on this host (%s) needs commands (%s)", what, host, strings.Join(Kinds(), ", "))
	case rf.local:
		return Faults{Local: true}, nil
	}
	cmds := rf.commands
	if len(cmds) == 0 {
		return Faults{}, c.bad(p+".faults", "%s: faults: no commands (want `local` or some of %s)", what, actionList())
	}
	if _, ok := cmds[fault.ActionStall]; ok {
		if _, ok := cmds[fault.ActionResume]; !ok {
			return Faults{}, c.bad(p+".faults", "%s: faults: a stall command needs a resume command (p2pfault never leaves a source stopped)", what)
		}
	}
	return Faults{Commands: cmds}, nil
}

// decode is go-yaml's strict decoding, with its panics turned into errors:
// go-yaml v1.19.2 dereferences nil on some malformed input (found by
// FuzzParse: a tag with no value in a list, "sources:\n  ! #x"), and bad
// input must be an error, never a crash.
func decode(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("not a valid attach file (the YAML decoder failed: %v)", r)
		}
	}()
	return yaml.UnmarshalWithOptions(data, v, yaml.Strict())
}

// formatYAMLError renders a decoding error as FILE:LINE: message.
func formatYAMLError(name string, err error) string {
	var le *lineError
	if errors.As(err, &le) {
		if le.line > 0 {
			return fmt.Sprintf("%s:%d: %s", name, le.line, le.msg)
		}
		return name + ": " + le.msg
	}
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil && ye.GetToken().Position != nil {
		return fmt.Sprintf("%s:%d: %s", name, ye.GetToken().Position.Line, ye.GetMessage())
	}
	return name + ": " + err.Error()
}

// pathLine is the line of the node at a YAML path, 0 when there is none.
func pathLine(tree *ast.File, path string) int {
	p, err := yaml.PathString(path)
	if err != nil {
		return 0
	}
	n, err := p.FilterFile(tree)
	if err != nil || n == nil {
		return 0
	}
	return line(n)
}

// parseURL accepts http(s)://HOST[:PORT][/] and nothing more: the probe
// adds the API paths itself.
func parseURL(s string) (Endpoint, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Endpoint{}, errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return Endpoint{}, errors.New("want http://HOST:PORT or https://HOST:PORT")
	}
	if u.Hostname() == "" {
		return Endpoint{}, errors.New("no host")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Endpoint{}, errors.New("want only scheme, host and port (the API paths are added by p2pfault)")
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if ps := u.Port(); ps != "" {
		port, err = strconv.Atoi(ps)
		if err != nil || port < 1 || port > 65535 {
			return Endpoint{}, fmt.Errorf("port %q: want 1-65535", ps)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return Endpoint{}, errors.New("empty port")
	}
	return Endpoint{URL: strings.TrimSuffix(s, "/"), Host: u.Hostname(), Port: port}, nil
}

func parseHostPort(s string) (string, int, error) {
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, errors.New("want HOST:PORT")
	}
	if host == "" {
		return "", 0, errors.New("no host")
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("port %q: want 1-65535", ps)
	}
	return host, port, nil
}

// isLoopback reports whether host names this machine's loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Moved is s at the address a replace command printed (ParseAddress).
func (s Source) Moved(a Address) Source {
	s.Endpoint, s.P2PHost, s.P2PPort = a.Endpoint, a.P2PHost, a.P2PPort
	s.P2P = net.JoinHostPort(a.P2PHost, strconv.Itoa(a.P2PPort))
	return s
}

// Address is where a replaced source's new engine answers.
type Address struct {
	Endpoint
	P2PHost string
	P2PPort int
}

// ParseAddress reads the new engine's address from a replace command's
// output: its last line that is `HOST:PORT P2P_HOST:P2P_PORT` (the HTTP
// address, the P2P address), so a command may print other lines before.
// The HTTP address gets scheme (the source's URL's) and no path.
func ParseAddress(output, scheme string) (Address, error) {
	lines := strings.Split(strings.TrimSpace(output), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) != 2 {
			continue
		}
		if _, _, err := parseHostPort(f[0]); err != nil {
			continue
		}
		ph, pp, err := parseHostPort(f[1])
		if err != nil {
			continue
		}
		ep, err := parseURL(scheme + "://" + f[0])
		if err != nil {
			continue
		}
		return Address{Endpoint: ep, P2PHost: ph, P2PPort: pp}, nil
	}
	printed := "it printed nothing"
	if out := strings.TrimSpace(output); out != "" {
		if len(out) > 200 {
			out = "…" + out[len(out)-200:]
		}
		printed = fmt.Sprintf("it printed %q", out)
	}
	return Address{}, fmt.Errorf("its output has no line `HOST:PORT P2P_HOST:P2P_PORT` naming the new engine (%s)", printed)
}

// Fill returns argv with the source's placeholders filled in for grain g:
// on one rank, {rank} is the rank and {p2p_port} its own P2P port.
func (s *Source) Fill(argv []string, g fault.Grain) []string {
	port, rank := s.P2PPort, ""
	if g.OnRank {
		port, rank = s.P2PPort+g.Rank, strconv.Itoa(g.Rank)
	}
	r := strings.NewReplacer(
		PlaceholderName, s.Name,
		PlaceholderHost, s.Host,
		PlaceholderPort, strconv.Itoa(s.Port),
		PlaceholderP2PHost, s.P2PHost,
		PlaceholderP2PPort, strconv.Itoa(port),
		PlaceholderRank, rank,
	)
	out := make([]string, len(argv))
	for i, w := range argv {
		out[i] = r.Replace(w)
	}
	return out
}
