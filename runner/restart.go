package runner

// restartArgs are appended to a simulated engine's argv when it is started
// again (Restart, Restore): its model load then lasts cfg.RestartDelay, a
// real restart's length, while first starts keep the sim's short default.
// The sim scales --sim-startup-delay by its time scale, as every delay.
func (c *Cluster) restartArgs() []string {
	if c.cfg.Engine != EngineSim || c.cfg.RestartDelay <= 0 {
		return nil
	}
	return []string{"--sim-startup-delay", c.cfg.RestartDelay.String()}
}
