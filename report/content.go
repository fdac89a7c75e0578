package report

import (
	"fmt"
	"strings"

	"p2pfault/check"
	"p2pfault/event"
)

// ContentRow is a row's content check (check content_matches) as
// report.json's rows[].content has it; absent when the run compared no
// texts (--content-tokens 0, or events written before the check).
type ContentRow struct {
	Match  string `json:"match"`  // the rule: exact or prefix:N
	Tokens int    `json:"tokens"` // max_tokens of every seed and pull
	// Returned200 pulls answered 200; Compared of them had a source
	// completion to compare; Wrong of those answered other text.
	Returned200 int                `json:"returned_200"`
	Compared    int                `json:"compared"`
	Wrong       int                `json:"wrong"`
	BySource    []ContentSourceRow `json:"by_source"`
	// Mismatches are the first maxMismatches wrong pulls, by start
	// (events.jsonl has every one).
	Mismatches []MismatchRow `json:"mismatches"`
}

// ContentSourceRow is one source's compared pulls and mismatches.
type ContentSourceRow struct {
	Source   int `json:"source"`
	Compared int `json:"compared"`
	Wrong    int `json:"wrong"`
}

// MismatchRow is one pull whose text was not its source's.
type MismatchRow struct {
	Source     int     `json:"source"`
	Trial      int64   `json:"trial"`
	StartS     float64 `json:"start_s"`
	Cached     int     `json:"cached_tokens"` // 0: the decoder prefilled it locally
	PullText   string  `json:"pull_text"`
	SourceText string  `json:"source_text"`
}

// maxMismatches bounds the mismatches a row lists.
const maxMismatches = 20

// contentRow summarises the run's content check; nil when it had none.
func contentRow(r Run) *ContentRow {
	rule := check.ContentRuleOf(r.Info)
	if !rule.On {
		return nil
	}
	sum := check.SummarizeContent(r.Samples, rule)
	c := &ContentRow{
		Match: rule.String(), Tokens: r.Info.ContentTokens,
		Returned200: sum.Returned200, Compared: sum.Compared, Wrong: sum.Wrong,
		BySource: []ContentSourceRow{}, Mismatches: []MismatchRow{},
	}
	for _, s := range sum.BySource {
		c.BySource = append(c.BySource, ContentSourceRow{Source: s.Source, Compared: s.Compared, Wrong: s.Wrong})
	}
	for i, s := range sum.Mismatches {
		if i == maxMismatches {
			break
		}
		c.Mismatches = append(c.Mismatches, MismatchRow{Source: s.Source, Trial: s.Trial, StartS: roundMillis(s.Start.Seconds()),
			Cached: s.CachedTokens, PullText: s.PullText, SourceText: s.SourceText})
	}
	return c
}

// contentHeader is the content table's header: per row, the rule, the
// pulls compared of those that returned 200, and the wrong ones.
func contentHeader(withMode keyCols) []string {
	return append(keyHead(withMode), "content_match", "compared", "wrong")
}

// contentCells is each row's line of the content table; nil when no row
// compared texts.
func contentCells(rows []Row, withMode keyCols) [][]string {
	var out [][]string
	any := false
	for _, r := range rows {
		any = any || r.Content != nil
	}
	if !any {
		return nil
	}
	for _, r := range rows {
		c := r.Content
		if c == nil {
			out = append(out, append(r.keyCells(withMode), "off", notApplicable, notApplicable))
			continue
		}
		wrong := fmt.Sprint(c.Wrong)
		var by []string
		for _, s := range c.BySource {
			if s.Wrong > 0 {
				by = append(by, fmt.Sprintf("%s %d", event.SourceName(s.Source), s.Wrong))
			}
		}
		if len(by) > 0 {
			wrong += " (" + strings.Join(by, ", ") + ")"
		}
		out = append(out, append(r.keyCells(withMode), c.Match, fmt.Sprintf("%d/%d", c.Compared, c.Returned200), wrong))
	}
	return out
}

// ContentTable is the content table as aligned plain text, printed under
// the times table; "" when no row compared texts.
func ContentTable(rows []Row) string { return contentTable(rows).plain() }

func contentTable(rows []Row) table {
	withMode := manyModes(rows)
	return table{contentHeader(withMode), contentCells(rows, withMode),
		"Content (check " + check.NameContentMatches + "; compared: pulls that returned 200 with a source completion to compare, of those that returned 200):"}
}

// writeContent appends report.md's content table and the first
// mismatches of each row that had any.
func writeContent(b *strings.Builder, rows []Row) {
	if !contentTable(rows).writeMarkdown(b) {
		return
	}
	for _, r := range rows {
		if r.Content == nil || len(r.Content.Mismatches) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n%s: pulls that returned other text than the source's completion", r.title())
		if r.Content.Wrong > len(r.Content.Mismatches) {
			fmt.Fprintf(b, " (the first %d of %d)", len(r.Content.Mismatches), r.Content.Wrong)
		}
		b.WriteString(":\n\n")
		for _, m := range r.Content.Mismatches {
			fmt.Fprintf(b, "- %s, trial %d at %.1fs (%s): pull %s, source %s\n", event.SourceName(m.Source), m.Trial, m.StartS,
				cachedWords(m.Cached), check.QuoteText(m.PullText), check.QuoteText(m.SourceText))
		}
	}
}

// cachedWords says what the decoder counted of a wrong pull's KV.
func cachedWords(cached int) string {
	if cached > 0 {
		return fmt.Sprintf("cached %d", cached)
	}
	return "cached 0: prefilled locally"
}
