package cli

import (
	"p2pfault/exitcode"
	"p2pfault/report"
	"p2pfault/runfolder"
	"p2pfault/safefile"
)

// runFiles are the files a run writes in its folder under fixed names
// (the engines' logs are checked as each engine starts).
var runFiles = []string{
	runfolder.Events, runfolder.EventsZstd, runfolder.Sessions, runfolder.Stalls, runfolder.Annotations,
	report.FileMarkdown, report.FileJSON, report.FileJUnit, report.FileHTML, report.FileTimeline, compareSeedFile,
}

// refuseLinksIn stops a run at its start (exit 2, naming the file) when a
// folder it writes in holds a symbolic link, or anything but a regular
// file, under the name of a file it writes: it would never write through
// it, so it would fail at its end instead.
func refuseLinksIn(dirs ...string) error {
	for _, d := range dirs {
		if err := safefile.RefuseLinks(d, runFiles...); err != nil {
			return exitcode.AsUsage(err)
		}
	}
	return nil
}
