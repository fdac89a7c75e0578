package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"p2pfault/event"
	"p2pfault/runfolder"
	"p2pfault/safefile"
)

// Report file names in the output folder.
const (
	FileMarkdown = "report.md"
	FileJSON     = "report.json"
	FileJUnit    = "junit.xml"
	FileEvents   = runfolder.Events
	FileTimeline = "timeline.svg"
)

// WriteAll writes report.md, report.json, junit.xml, report.html and
// annotations.json (the fault windows for Grafana) for runs into dir
// (created if missing), and a timeline per run: timeline.svg for one run,
// timeline-<arm>-<case>.svg for several. Each file is written to a
// temporary name and renamed, so a reader never sees half a report.
func WriteAll(dir string, runs []Run) error {
	if len(runs) == 0 {
		return fmt.Errorf("write reports into %s: no runs", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create report folder: %w", err)
	}
	rows := Rows(runs)
	var b bytes.Buffer
	if err := WriteMarkdown(&b, rows...); err != nil {
		return err
	}
	if err := writeFile(dir, FileMarkdown, b.Bytes()); err != nil {
		return err
	}
	b.Reset()
	if err := WriteJSON(&b, rows...); err != nil {
		return err
	}
	if err := writeFile(dir, FileJSON, b.Bytes()); err != nil {
		return err
	}
	b.Reset()
	if err := WriteJUnit(&b, runs...); err != nil {
		return err
	}
	if err := writeFile(dir, FileJUnit, b.Bytes()); err != nil {
		return err
	}
	b.Reset()
	if err := WriteHTML(&b, runs); err != nil {
		return err
	}
	if err := writeFile(dir, FileHTML, b.Bytes()); err != nil {
		return err
	}
	b.Reset()
	if err := WriteAnnotations(&b, runs); err != nil {
		return err
	}
	if err := writeFile(dir, FileAnnotations, b.Bytes()); err != nil {
		return err
	}
	for _, r := range runs {
		name := FileTimeline
		if len(runs) > 1 {
			name = TimelineName(r)
		}
		b.Reset()
		if err := WriteSVG(&b, r); err != nil {
			return err
		}
		if err := writeFile(dir, name, b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// TimelineName is the timeline file of run among several:
// timeline-<arm>-<case>.svg (timeline-<arm>-pd-<case>.svg for a pd row,
// then -NAME_VALUE per swept setting),
// with anything but letters, digits, '.', '_' and '-' in the names
// replaced by '_' ("+ #64501" is a fine arm name but not a fine file name).
func TimelineName(r Run) string {
	name := runTitle(fileSafe(r.Info.Arm), fileSafe(event.ModeOf(r.Info.Mode)), fileSafe(r.Info.Case), "-")
	if len(r.Info.Settings) > 0 {
		name += "-" + fileSafe(event.SettingsText(r.Info.Settings, "-"))
	}
	return "timeline-" + name + ".svg"
}

func fileSafe(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			return c
		}
		return '_'
	}, s)
}

func writeFile(dir, name string, data []byte) error {
	return safefile.Write(filepath.Join(dir, name), data, safefile.ReportPerm)
}
