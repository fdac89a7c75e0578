package experiment

import (
	"p2pfault/fault"
	"p2pfault/runner"
)

// ClusterConfig is the runner configuration Run starts the engines with:
// the configured cluster with the run's output folder and time scale (the
// simulated engines' --sim-time-scale). A check made without a run
// (p2pfault doctor) plans it with runner.Plan, so it sees the command
// lines the run would start and nothing else.
func (c Config) ClusterConfig() runner.Config {
	cc := c.Cluster
	cc.OutDir = c.OutDir
	cc.TimeScale = c.TimeScale
	return cc
}

// ScriptedTimeline is the timeline the run plays, at real time (before
// --time-scale): the --timeline given, or the case's preset.
func (c Config) ScriptedTimeline() (fault.Timeline, error) { return c.scriptedTimeline() }
