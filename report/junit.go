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
		if t := r.Row().Times; t != nil {
			// The judged fault's times in seconds, "null" when it never happened.
			s.Properties = append(s.Properties,
				junitProperty{Name: "detect_s", Value: junitSeconds3(t.DetectS)},
				junitProperty{Name: "recover_s", Value: junitSeconds3(t.RecoverS)})
		}
		if !r.First.IsZero() {
			s.Timestamp = r.First.UTC().Format("2006-01-02T15:04:05")
		}
		class := "p2pfault." + runTitle(r.Info.Arm, r.Info.Mode, r.Info.Case, ".") + settingsSuffix(r.Info.Settings, ".")
		if event.ModeOf(r.Info.Mode) != event.ModeP2P {
			s.Properties = append(s.Properties, junitProperty{Name: "mode", Value: r.Info.Mode})
		}
		for _, c := range r.Verdict.Checks {
			tc := junitCase{Name: c.Name, Classname: class, Time: junitSeconds(0)}
			if !c.Passed {
				kind := "bound"
				if c.Empty {
					kind = "empty_window"
				}
				tc.Failure = &junitFailure{Message: c.Detail, Type: kind, Text: c.Detail + "\n" + r.Row().SeedLine()}
				s.Failures++
			}
			s.Cases = append(s.Cases, tc)
		}
		s.Tests = len(s.Cases)
		s.SystemOut = &junitText{Text: systemOut(r)}
		doc.Suites = append(doc.Suites, s)
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		total += r.Wall()
		// A run of many windows: one suite per window, its checks.
		for _, ws := range windowSuites(r, class) {
			doc.Suites = append(doc.Suites, ws)
			doc.Tests += ws.Tests
			doc.Failures += ws.Failures
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

// windowSuites are a run's fault windows as suites "arm/case window N"
// (properties kind, source, start_s, length_s, detect_s, recover_s), one
// test case per check of the window; none for a run of one window.
func windowSuites(r Run, class string) []junitSuite {
	var out []junitSuite
	for _, w := range r.Row().Windows {
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
			if !c.Passed {
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
