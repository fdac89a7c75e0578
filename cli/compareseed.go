package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"p2pfault/report"
)

// printCompareSeed prints the seed's table beside the slice's rows and
// writes the same text to OUT/compare-seed.txt.
func printCompareSeed(w io.Writer, out string, rows []report.Row, scale float64, interval time.Duration) error {
	sc := report.SeedScale{TimeScale: scale, Interval: interval}
	text := report.CompareSeedTable(report.CompareSeed(rows, sc), sc)
	fmt.Fprintln(w)
	fmt.Fprint(w, text)
	if err := os.WriteFile(filepath.Join(out, "compare-seed.txt"), []byte(text), 0o644); err != nil {
		return fmt.Errorf("write compare-seed.txt: %w", err)
	}
	return nil
}
