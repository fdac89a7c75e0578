package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"p2pfault/report"
	"p2pfault/safefile"
)

// compareSeedFile is the seed's table beside a slice's rows, in the
// slice's folder.
const compareSeedFile = "compare-seed.txt"

// printCompareSeed prints the seed's table beside the slice's rows and
// writes the same text to OUT/compare-seed.txt.
func printCompareSeed(w io.Writer, out string, rows []report.Row, scale float64, interval time.Duration) error {
	sc := report.SeedScale{TimeScale: scale, Interval: interval}
	text := report.CompareSeedTable(report.CompareSeed(rows, sc), sc)
	fmt.Fprintln(w)
	fmt.Fprint(w, text)
	return safefile.Write(filepath.Join(out, compareSeedFile), []byte(text), safefile.ReportPerm)
}
