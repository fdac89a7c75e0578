package event

import "strconv"

// SourceName is source i's name, "source-0": the one spelling of it that
// the timeline, the keys, the runner's engines, the faces and the
// reports share. It lives here because every package reads the event
// stream and none is below it, so no import cycle can stand in the way.
func SourceName(i int) string { return "source-" + strconv.Itoa(i) }
