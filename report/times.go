package report

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"p2pfault/check"
	"p2pfault/event"
)

// timesHeader is the second table's header: the judged fault's detect and
// recover times per row, under the seed's table (which stays as it is).
func timesHeader(withMode keyCols) []string {
	return append(keyHead(withMode), "detect_s", "recover_s")
}

// timesCells is each row's line of the times table; "–" where a time
// never happened or the row has no fault.
func timesCells(rows []Row, withMode keyCols) [][]string {
	out := make([][]string, 0, len(rows))
	for _, r := range rows {
		detect, recover := notApplicable, notApplicable
		if r.Times != nil {
			detect, recover = check.FormatSeconds(r.Times.DetectS), check.FormatSeconds(r.Times.RecoverS)
		}
		out = append(out, append(r.keyCells(withMode), detect, recover))
	}
	return out
}

// TimesTable is the times table as aligned plain text, printed under the
// seed's table (Table prints both).
func TimesTable(rows []Row) string {
	withMode := manyModes(rows)
	return plainTable(timesHeader(withMode), timesCells(rows, withMode))
}

func plainTable(head []string, rows [][]string) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

func markdownTable(head []string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(head, " | ") + " |\n")
	b.WriteString(strings.Repeat("|---", len(head)) + "|\n")
	for _, r := range rows {
		cells := append([]string(nil), r...)
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

// table is one of the report's tables: the terminal prints it as aligned
// plain text, report.md as markdown under its caption; with no cells,
// neither prints it.
type table struct {
	head    []string
	cells   [][]string
	caption string // report.md's, ending in its "." or ":"
}

// plain is the table as aligned plain text; "" with no cells.
func (t table) plain() string {
	if len(t.cells) == 0 {
		return ""
	}
	return plainTable(t.head, t.cells)
}

// writeMarkdown appends the table and its caption to report.md, and says
// whether it did (with no cells it does not).
func (t table) writeMarkdown(b *strings.Builder) bool {
	if len(t.cells) == 0 {
		return false
	}
	b.WriteString("\n" + t.caption + "\n\n")
	b.WriteString(markdownTable(t.head, t.cells))
	return true
}

// writeVerifications appends report.md's list of the fault actions
// checked on the host, per row that has any.
func writeVerifications(b *strings.Builder, rows []Row) {
	any := false
	for _, r := range rows {
		any = any || len(r.Verifications) > 0
	}
	if !any {
		return
	}
	b.WriteString("\nFaults verified on the host (check " + check.NameFaultTookEffect + "):\n\n")
	for _, r := range rows {
		for _, v := range r.Verifications {
			seen := "took effect"
			if !tookEffect(v) {
				seen = "**did not take effect**"
			}
			fmt.Fprintf(b, "- %s: %s %s at %.1fs %s after %.2fs: %s\n",
				r.title(), v.Action, v.TargetName(), v.At.Seconds(), seen, v.After.Seconds(), v.Detail)
		}
	}
}

// tookEffect is whether the host showed the action within the check's time.
func tookEffect(v event.Verification) bool {
	return v.Verified && v.After <= check.DefaultVerifyWithin
}

func junitSeconds3(s *float64) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%.3f", *s)
}
