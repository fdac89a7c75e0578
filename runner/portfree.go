package runner

// PortFree reports whether port can be bound on Host now, by the rule
// Start uses to decide whether a planned port is taken.
func PortFree(port int) bool { return portFree(port) }
