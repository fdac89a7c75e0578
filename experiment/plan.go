package experiment

import "p2pfault/fault"

// ScriptedTimeline is the timeline the run plays, at real time (before
// --time-scale): the --timeline given, or the case's preset.
func (c Config) ScriptedTimeline() (fault.Timeline, error) { return c.scriptedTimeline() }
