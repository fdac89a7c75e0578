package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"p2pfault/event"
)

// The JUnit XML shape CI systems read (GitLab, Jenkins, GitHub test
// reporters): testsuites > testsuite (one per run) > testcase (one per
// check), a failure element on each check that failed.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr,omitempty"` // runs cut short (junitCut)
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

// junitText is element text kept as CDATA, so its line breaks stay line
// breaks rather than &#xA; for whoever reads the XML.
type junitText struct {
	Text string `xml:",cdata"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Error     *junitFailure `xml:"error,omitempty"` // a check a run cut short left open
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// WriteJUnit writes junit.xml: one testsuite per run named "arm/case", one
// testcase per check. A suite's time is the run's wall time; a testcase's
// is 0, as every check is evaluated at once over the whole run.
func WriteJUnit(w io.Writer, runs ...Run) error {
	doc := junitSuites{Name: "p2pfault"}
	var total time.Duration
	for _, r := range runs {
		class := "p2pfault." + runTitle(r.Info.Arm, r.Info.Mode, r.Info.Case, ".") + settingsSuffix(r.Info.Settings, ".")
		s := runSuite(r, class)
		doc.Suites = append(doc.Suites, s)
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		total += r.Wall()
		// A run of many windows: one suite per window, its checks.
		for _, ws := range windowSuites(r, class) {
			doc.Suites = append(doc.Suites, ws)
			doc.Tests += ws.Tests
			doc.Failures += ws.Failures
			doc.Errors += ws.Errors
		}
	}
	doc.Time = junitSeconds(total)

	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("write junit.xml: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write junit.xml: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("write junit.xml: %w", err)
	}
	return nil
}

// runSuite is one run as a suite: its settings as properties, one test
// case per check, and the run itself when it was cut short. A step of its
// own so that WriteJUnit reads as the document's totals and its encoding.
func runSuite(r Run, class string) junitSuite {
	s := junitSuite{
		Name: r.Name(),
		Time: junitSeconds(r.Wall()),
		Properties: []junitProperty{
			{Name: "arm", Value: r.Info.Arm},
			{Name: "case", Value: r.Info.Case},
			{Name: "engine", Value: r.Info.Engine},
			{Name: "time_scale", Value: fmt.Sprintf("%g", r.Info.TimeScale)},
			{Name: "truncated", Value: fmt.Sprintf("%t", r.Truncated)},
		},
	}
	if t := r.Verdict.Times; r.HasWindow && t != nil {
		// The judged fault's times in seconds, "null" when it never happened.
		s.Properties = append(s.Properties,
			junitProperty{Name: "detect_s", Value: junitSeconds3(t.DetectS)},
			junitProperty{Name: "recover_s", Value: junitSeconds3(t.RecoverS)})
	}
	if !r.First.IsZero() {
		s.Timestamp = r.First.UTC().Format("2006-01-02T15:04:05")
	}
	if event.ModeOf(r.Info.Mode) != event.ModeP2P {
		s.Properties = append(s.Properties, junitProperty{Name: "mode", Value: r.Info.Mode})
	}
	row := r.Row()
	cut := row.CutShort
	for _, c := range r.Verdict.Checks {
		tc := junitCase{Name: c.Name, Classname: class, Time: junitSeconds(0)}
		switch {
		// Cut short, a check that broke nothing is left open.
		case !c.Passed && cut != "" && (c.Empty || row.Result == ResultInterrupted):
			tc.Error = junitCut(c.Detail, cut)
			s.Errors++
		case !c.Passed:
			kind := "bound"
			if c.Empty {
				kind = "empty_window"
			}
			tc.Failure = &junitFailure{Message: c.Detail, Type: kind, Text: c.Detail + "\n" + row.SeedLine()}
			s.Failures++
		}
		s.Cases = append(s.Cases, tc)
	}
	if cut != "" {
		// The run itself, cut short: an error (it did not run its
		// course), not a failure (no bound says so).
		s.Cases = append(s.Cases, junitCase{Name: junitCompleted, Classname: class, Time: junitSeconds(0), Error: junitCut(cut, cut)})
		s.Errors++
	}
	s.Tests = len(s.Cases)
	s.SystemOut = &junitText{Text: systemOut(r)}
	return s
}

// windowSuites are a run's fault windows as suites "arm/case window N"
// (properties kind, source, start_s, length_s, detect_s, recover_s), one
// test case per check of the window; none for a run of one window.
func windowSuites(r Run, class string) []junitSuite {
	var out []junitSuite
	row := r.Row()
	for _, w := range row.Windows {
		s := junitSuite{
			Name: fmt.Sprintf("%s window %d", r.Name(), w.Index),
			Time: junitSeconds(0),
			Properties: []junitProperty{
				{Name: "kind", Value: w.Kind},
				{Name: "source", Value: event.SourceName(w.Source)},
				{Name: "start_s", Value: fmt.Sprintf("%.3f", w.StartS)},
				{Name: "length_s", Value: fmt.Sprintf("%.3f", w.LengthS)},
				{Name: "detect_s", Value: junitSeconds3(w.Times.DetectS)},
				{Name: "recover_s", Value: junitSeconds3(w.Times.RecoverS)},
			},
		}
		wclass := fmt.Sprintf("%s.window%d", class, w.Index)
		for _, c := range w.Checks {
			tc := junitCase{Name: c.Name, Classname: wclass, Time: junitSeconds(0)}
			switch {
			case !c.Passed && w.Result == ResultInterrupted:
				tc.Error = junitCut(c.Detail, row.CutShort)
				s.Errors++
			case !c.Passed:
				kind := "bound"
				if strings.HasPrefix(c.Detail, "empty") {
					kind = "empty_window"
				}
				tc.Failure = &junitFailure{Message: c.Detail, Type: kind, Text: c.Detail}
				s.Failures++
			}
			s.Cases = append(s.Cases, tc)
		}
		s.Tests = len(s.Cases)
		out = append(out, s)
	}
	return out
}

// junitCompleted is the test case a run cut short adds to its suite: its
// error says why the run did not end.
const junitCompleted = "run_completed"

// junitCut is the error of a test case a run cut short by why left
// without a verdict: detail, and the cut.
func junitCut(detail, why string) *junitFailure {
	msg := detail
	if detail != why {
		msg = fmt.Sprintf("%s (the run was cut short: %s)", detail, why)
	}
	return &junitFailure{Message: msg, Type: "interrupted", Text: msg}
}

// systemOut is what a CI page shows under the suite: the seed's summary
// lines and how the run ended.
func systemOut(r Run) string {
	sum := r.Verdict.Summary
	lines := []string{sum.Faulted.SeedLine("faulted"), sum.Healthy.SeedLine("healthy")}
	if r.HasWindow && r.Window.Recovers {
		lines = append(lines, sum.Recovery.SeedLine("recovery"))
	}
	if r.EndMessage != "" {
		lines = append(lines, "end: "+r.EndMessage)
	}
	if r.Truncated {
		lines = append(lines, "truncated: the events end without an end event or with a partial line")
	}
	return strings.Join(lines, "\n") + "\n"
}

func junitSeconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
