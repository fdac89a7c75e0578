package fault

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
)

// Step is one line of a timeline: `at 10s stall source-0 for 30s`.
// Its Action's Options hold the kind's word before the target (Arg:
// "30%" for loss, "" for kinds without one) and, for kinds that take
// "for" (stall, partition, loss), how long until it is undone (For; 0 =
// until undone: resume, heal).
type Step struct {
	At time.Duration // since the timeline's start (the run's t0)
	Action
	Line int // position in the script, for errors; 0 for presets
	Col  int
}

// String renders the step in the timeline language; Parse reads it back.
func (s Step) String() string {
	out := fmt.Sprintf("at %v %s %s", s.At, s.Kind.Name, s.TargetName())
	if s.Arg != "" {
		out = fmt.Sprintf("at %v %s %s %s", s.At, s.Kind.Name, s.Arg, s.TargetName())
	}
	if s.For > 0 {
		out += fmt.Sprintf(" for %v", s.For)
	}
	return out
}

// Timeline is a script of fault steps, in time order.
type Timeline []Step

// String renders the timeline on one line, steps separated by "; ".
func (t Timeline) String() string {
	parts := make([]string, len(t))
	for i, s := range t {
		parts[i] = s.String()
	}
	return strings.Join(parts, "; ")
}

// token is a word of the script and where it starts.
type token struct {
	text      string
	line, col int
}

// syntaxError is a parse error at a position: "timeline:1:4: ...".
func syntaxError(line, col int, format string, args ...any) error {
	return exitcode.Usagef("timeline:%d:%d: %s", line, col, fmt.Sprintf(format, args...))
}

// Parse reads a timeline: steps separated by ";" or newlines, each
//
//	at DURATION ACTION [ARG] TARGET [for DURATION]
//
// with TARGET source-N (the whole engine), source-N/rankR (one
// data-parallel rank's engine core, for the kinds that act on one: Grains),
// decoder-N (a decoder) or source-N from decoder-M (that pair's link
// alone, for the kinds with Pairs), ACTION a registered kind's name (stall, resume, kill, remove,
// restore, partition, loss, heal; "for" only with kinds that take it), ARG
// the word a kind takes (loss: a share such as 30%; no other kind has one) and DURATION a Go duration (10s, 1.5s, 2m). "#" starts a comment.
// Steps are returned sorted by time (stable). Errors are usage errors that
// name the position: `timeline:1:4: bad duration "10x"`.
func Parse(text string) (Timeline, error) {
	var t Timeline
	for i, line := range strings.Split(text, "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		var stmt []token
		flush := func(endCol int) error {
			if len(stmt) == 0 {
				return nil
			}
			s, err := parseStep(stmt, i+1, endCol)
			stmt = nil
			if err != nil {
				return err
			}
			t = append(t, s)
			return nil
		}
		start := -1
		for j := 0; j <= len(line); j++ {
			end := j == len(line)
			sep := !end && line[j] == ';'
			space := !end && (line[j] == ' ' || line[j] == '\t' || line[j] == '\r')
			if end || sep || space {
				if start >= 0 {
					stmt = append(stmt, token{text: line[start:j], line: i + 1, col: start + 1})
					start = -1
				}
				if end || sep {
					if err := flush(j + 1); err != nil {
						return nil, err
					}
				}
				continue
			}
			if start < 0 {
				start = j
			}
		}
	}
	slices.SortStableFunc(t, func(a, b Step) int { return cmp.Compare(a.At, b.At) })
	return t, nil
}

// parseStep parses one statement; endCol is where it ends, for "missing"
// errors.
func parseStep(toks []token, line, endCol int) (Step, error) {
	c := &stepCursor{toks: toks, line: line, endCol: endCol}
	s := Step{Line: toks[0].line, Col: toks[0].col}
	at, err := c.want(`"at"`)
	if err != nil {
		return s, err
	}
	if at.text != "at" {
		return s, syntaxError(at.line, at.col, `want "at DURATION ACTION source-N", got %q`, at.text)
	}
	d, err := c.want("a duration")
	if err != nil {
		return s, err
	}
	if s.At, err = parseDuration(d); err != nil {
		return s, err
	}
	a, err := c.want("an action")
	if err != nil {
		return s, err
	}
	k, ok := Lookup(a.text)
	if !ok {
		return s, syntaxError(a.line, a.col, "unknown action %q (want %s)", a.text, Names())
	}
	s.Kind = k
	if err := c.arg(&s, k); err != nil {
		return s, err
	}
	tg, err := c.want("a target")
	if err != nil {
		return s, err
	}
	if s.Source, s.Grain, err = parseTarget(tg); err != nil {
		return s, err
	}
	if s.OnRank {
		if err := k.RankRefusal(); err != nil {
			return s, syntaxError(tg.line, tg.col, "%s %s: %v", k.Name, tg.text, err)
		}
	}
	if err := c.pair(&s, k, tg); err != nil {
		return s, err
	}
	if err := c.forClause(&s, k); err != nil {
		return s, err
	}
	if c.next < len(toks) {
		x := toks[c.next]
		return s, syntaxError(x.line, x.col, "unexpected %q after %q", x.text, joinTokens(toks[:c.next]))
	}
	return s, nil
}

// stepCursor walks one statement's tokens, so that parseStep's optional
// parts (an action's argument, "for DURATION") can be steps of their own
// that share where the statement has got to and how a missing token is
// reported.
type stepCursor struct {
	toks         []token
	next         int
	line, endCol int
}

// want takes the next token; none left is a "missing WHAT" at the
// statement's end.
func (c *stepCursor) want(what string) (token, error) {
	if c.next >= len(c.toks) {
		return token{}, syntaxError(c.line, c.endCol, "missing %s after %q", what, joinTokens(c.toks))
	}
	c.next++
	return c.toks[c.next-1], nil
}

// pair takes "from decoder-M" after a source's target: the action acts on
// that source's link with decoder M alone (a kind with Pairs).
func (c *stepCursor) pair(s *Step, k *Kind, tg token) error {
	if c.next >= len(c.toks) || c.toks[c.next].text != "from" {
		return nil
	}
	from := c.toks[c.next]
	c.next++
	pt, err := c.want("a decoder (from decoder-M)")
	if err != nil {
		return err
	}
	switch d, g, err := ParseTarget(pt.text); {
	case !k.Pairs:
		return syntaxError(from.line, from.col, "%s takes no pair (%s from %s): only %s do", k.Name, tg.text, pt.text, pairKinds())
	case s.Decoder || s.OnRank:
		return syntaxError(tg.line, tg.col, "a pair is a source and a decoder: want source-N from decoder-M, got %s from %s", tg.text, pt.text)
	case err != nil || !g.Decoder:
		return syntaxError(pt.line, pt.col, "a pair is a source and a decoder: want source-N from decoder-M, got %s from %s", tg.text, pt.text)
	default:
		s.Pair, s.Peer = true, d
	}
	return nil
}

// pairKinds names the kinds that take a pair: "partition, loss".
func pairKinds() string {
	var names []string
	for _, k := range Kinds() {
		if k.Pairs {
			names = append(names, k.Name)
		}
	}
	return strings.Join(names, ", ")
}

// arg takes the action's argument when the action has one; an optional
// argument is absent when the target comes next.
func (c *stepCursor) arg(s *Step, k *Kind) error {
	if k.Arg == nil || (k.Arg.Optional && c.next < len(c.toks) && isTarget(c.toks[c.next].text)) {
		return nil
	}
	arg, err := c.want(k.Arg.Name)
	if err != nil {
		return err
	}
	if err := k.Arg.Check(arg.text); err != nil {
		return syntaxError(arg.line, arg.col, "%s %q: %v", k.Name, arg.text, err)
	}
	s.Arg = arg.text
	return nil
}

// forClause takes "for DURATION" after the target, refused for an action
// that does not take one and required for one that needs it.
func (c *stepCursor) forClause(s *Step, k *Kind) error {
	if c.next < len(c.toks) && c.toks[c.next].text == "for" {
		f := c.toks[c.next]
		c.next++
		if !k.TakesFor {
			return syntaxError(f.line, f.col, `"for" goes only with %s, not %s`, TakesForList(), k.Name)
		}
		d, err := c.want("a duration")
		if err != nil {
			return err
		}
		if s.For, err = parseDuration(d); err != nil {
			return err
		}
		if s.For == 0 {
			return syntaxError(d.line, d.col, "%s for %q: want a positive duration", k.Name, d.text)
		}
	}
	if k.NeedsFor && s.For == 0 {
		return syntaxError(c.line, c.endCol, "%s needs \"for DURATION\" (nothing else ends it), e.g. %q", k.Name, joinTokens(c.toks)+" for 30s")
	}
	return nil
}

func parseDuration(tok token) (time.Duration, error) {
	d, err := time.ParseDuration(tok.text)
	if err != nil {
		return 0, syntaxError(tok.line, tok.col, "bad duration %q", tok.text)
	}
	if d < 0 {
		return 0, syntaxError(tok.line, tok.col, "negative duration %q", tok.text)
	}
	return d, nil
}

func parseTarget(tok token) (int, Grain, error) {
	i, g, err := ParseTarget(tok.text)
	if err != nil {
		return 0, Grain{}, syntaxError(tok.line, tok.col, "%v", err)
	}
	return i, g, nil
}

// isTarget says whether a timeline word names a target (and so is not an
// optional argument).
func isTarget(w string) bool {
	return strings.HasPrefix(w, "source-") || strings.HasPrefix(w, "decoder")
}

// ParseTarget reads a target's name: "source-N" (the whole engine),
// "source-N/rankR" (one data-parallel rank of it) or "decoder-N" (a
// decoder; "decoder" is decoder-0, the one decoder's name in a run of
// one). Errors name the text.
func ParseTarget(text string) (int, Grain, error) {
	if d, ok := strings.CutPrefix(text, "decoder"); ok {
		if d == "" {
			return 0, Grain{Decoder: true}, nil
		}
		n, ok := strings.CutPrefix(d, "-")
		i, ok := number(n, ok)
		if !ok {
			return 0, Grain{}, fmt.Errorf("bad target %q (want decoder-N, e.g. decoder-1, or decoder in a run of one)", text)
		}
		return i, Grain{Decoder: true}, nil
	}
	src, rank, ranked := strings.Cut(text, "/")
	n, ok := strings.CutPrefix(src, "source-")
	i, ok := number(n, ok)
	if !ok {
		return 0, Grain{}, fmt.Errorf("bad target %q (want source-N or source-N/rankR, e.g. source-0 or source-0/rank1)", text)
	}
	if !ranked {
		return i, Grain{}, nil
	}
	rs, ok := strings.CutPrefix(rank, "rank")
	r, ok := number(rs, ok)
	if !ok {
		return 0, Grain{}, fmt.Errorf("bad rank %q in target %q (want rankR, e.g. source-0/rank1)", rank, text)
	}
	return i, OneRank(r), nil
}

// number reads a non-negative decimal written without sign or leading
// zeros; ok false when s is none (or ok was false already).
func number(s string, ok bool) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, ok && err == nil && n >= 0 && s == strconv.Itoa(n)
}

// TakesForList names the kinds that take "for", for messages and help:
// "stall, partition, loss".
func TakesForList() string {
	var names []string
	for _, k := range Kinds() {
		if k.TakesFor {
			names = append(names, k.Name)
		}
	}
	return strings.Join(names, ", ")
}

func joinTokens(toks []token) string {
	parts := make([]string, len(toks))
	for i, t := range toks {
		parts[i] = t.text
	}
	return strings.Join(parts, " ")
}

// Check reports a step naming a source the cluster does not have, or a
// rank its source does not have (ranks: each source's data-parallel size
// by index, nil or 0 for one), with its position.
func (t Timeline) Check(sources int, ranks []int) error {
	for _, s := range t {
		if s.Decoder {
			continue // the cluster's decoders are counted when it opens: Experiment.admit
		}
		if s.Source >= sources {
			return exitcode.Usagef("timeline:%d:%d: %s names %s, but the cluster has sources 0-%d",
				s.Line, s.Col, s.String(), event.SourceName(s.Source), sources-1)
		}
		if n := event.RanksOf(ranks, s.Source); s.OnRank && s.Rank >= n {
			return exitcode.Usagef("timeline:%d:%d: %s names %s, but %s has %s",
				s.Line, s.Col, s.String(), s.TargetName(), event.SourceName(s.Source), rankList(n))
		}
	}
	return nil
}

// HasPair reports whether a step cuts a pair on the network (a link kind
// on a pair acts on its link, which any cluster has).
func (t Timeline) HasPair() bool {
	for _, s := range t {
		if s.Pair && !s.Kind.Link {
			return true
		}
	}
	return false
}

// NeedsLinks reports whether a step uses a link kind that the run's links
// must carry: every one, unless shaped (the cluster's targets are Shapers)
// and the steps are kinds that only slow a link, or unlink.
func (t Timeline) NeedsLinks(shaped bool) bool {
	for _, s := range t {
		if s.Kind.Link && !(shaped && (s.Kind.Shapes || s.Kind.Name == ActionUnlink)) {
			return true
		}
	}
	return false
}

// HasLink reports whether a step uses a link kind: the run then relays
// its pairs through links (experiment.Config.Link).
func (t Timeline) HasLink() bool { return t.NeedsLinks(false) }

// OnDecoder reports whether a step acts on a decoder or a pair.
func (t Timeline) OnDecoder() bool {
	for _, s := range t {
		if s.Decoder || s.Pair {
			return true
		}
	}
	return false
}

// CheckDecoders reports a step naming a decoder the cluster does not have
// (decoders: how many it has), with its position.
func (t Timeline) CheckDecoders(decoders int) error {
	for _, s := range t {
		if d := s.Source; s.Decoder && d >= decoders || s.Pair && s.Peer >= decoders {
			if s.Pair {
				d = s.Peer
			}
			return exitcode.Usagef("timeline:%d:%d: %s names %s, but the cluster has %s (--decoders)",
				s.Line, s.Col, s.String(), DecoderTarget(d), decoderList(decoders))
		}
	}
	return nil
}

// decoderList says which decoders a cluster of n has.
func decoderList(n int) string {
	if n == 1 {
		return "one decoder, decoder-0 (or decoder)"
	}
	return fmt.Sprintf("decoders 0-%d", n-1)
}

// rankList says which ranks a source of n has: "one rank (no
// --source-dp)" or "ranks 0-1".
func rankList(n int) string {
	if n <= 1 {
		return "one engine core (no data-parallel ranks: see --source-dp)"
	}
	return fmt.Sprintf("ranks 0-%d", n-1)
}

// CaseNone is the case with no scripted fault: the dashboard's default,
// only the keys' faults (and a headless soak).
const CaseNone = "none"

// Cases are the fault cases, from the registry (kinds with a Case), in
// the kinds' order: what `run --case` and `slice --cases` accept besides
// none.
func Cases() []string { return caseNames(OwnCase) }

// SeedCases are the seed's slice cases (stall, kill, remove): what
// `slice` runs by default, in the seed's table's order.
func SeedCases() []string { return caseNames(SeedCase) }

func caseNames(least Case) []string {
	var out []string
	for _, k := range Kinds() {
		if k.Case >= least {
			out = append(out, k.Name)
		}
	}
	return out
}

// CaseList names the cases for messages and help: "stall, kill, remove,
// partition or none".
func CaseList() string { return strings.Join(Cases(), ", ") + " or " + CaseNone }

// CaseKind returns the kind of case name (ok false for none and for a
// name that is no case).
func CaseKind(name string) (*Kind, bool) {
	k, ok := Lookup(name)
	if !ok || k.Case == NoCase {
		return nil, false
	}
	return k, true
}

// Preset returns case name as a timeline on source-0: its kind fired at
// at, for d when the kind takes "for" (the seed's stall is stopped at at
// for d; its kill and remove fire at at), or none's empty timeline. The
// experiment gives the times (the seed's 10 s and 30 s are its defaults).
func Preset(name string, at, d time.Duration) (Timeline, error) {
	if name == CaseNone {
		return Timeline{}, nil
	}
	k, ok := CaseKind(name)
	if !ok {
		return nil, exitcode.Usagef("case %q: want one of %s", name, strings.Join(append(Cases(), CaseNone), ", "))
	}
	s := Step{At: at, Action: Action{Kind: k, Source: 0}}
	if k.TakesFor {
		s.For = d
	}
	return Timeline{s}, nil
}

// Play fires each step at start+At, in order: a step whose time has come
// waits for the one before it to return (an act returns once its action is
// taken, not when it is undone, so this costs no more than the act), and
// steps on one source never overtake each other. It stops at the first
// step that fails, returning its error naming the step, or when ctx ends
// (steps not yet due are then skipped), returning ctx's error.
func (t Timeline) Play(ctx context.Context, start time.Time, fire func(context.Context, Step) error) error {
	for _, s := range t {
		timer := time.NewTimer(time.Until(start.Add(s.At)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		if err := fire(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}
