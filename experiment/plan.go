package experiment

import "p2pfault/fault"

// ScriptedTimeline is the timeline the run plays, at real time (before
// --time-scale): the --timeline given, the case's preset, or the
// nemesis' schedule for the cluster as planned.
func (c Config) ScriptedTimeline() (fault.Timeline, error) {
	if c.Nemesis == nil {
		return c.scriptedTimeline()
	}
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	p, err := c.Cluster.Plan(nil)
	if err != nil {
		return nil, err
	}
	return c.nemesisSchedule(p.Sources, p.Decoders)
}
