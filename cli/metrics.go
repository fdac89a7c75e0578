package cli

import (
	"io"

	"github.com/spf13/pflag"

	"p2pfault/exitcode"
	"p2pfault/exporter"
)

// metricsFlag is --metrics-listen, of run and slice: p2pfault's own
// /metrics (package exporter), off when not given.
type metricsFlag struct{ listen string }

func (m *metricsFlag) register(fs *pflag.FlagSet) {
	fs.StringVar(&m.listen, "metrics-listen", "", "serve the run's series for Prometheus on /metrics at this address: PORT (on 127.0.0.1) or HOST:PORT (see docs/monitoring.md); off when not given")
}

// check reads the flag's value (exit 2 naming it when bad).
func (m *metricsFlag) check(fs *pflag.FlagSet) (string, error) {
	if !fs.Changed("metrics-listen") {
		return "", nil
	}
	addr, err := exporter.ParseAddr(m.listen)
	if err != nil {
		return "", exitcode.Usagef("--metrics-listen %q: %w", m.listen, err)
	}
	return addr, nil
}

// start serves /metrics when the flag was given (nil when not: a nil
// exporter.Server drains what it is fed and finishes at once), saying
// where on stderr.
func (m *metricsFlag) start(fs *pflag.FlagSet, stderr io.Writer) (*exporter.Server, error) {
	addr, err := m.check(fs)
	if err != nil || addr == "" {
		return nil, err
	}
	srv, err := exporter.Listen(addr)
	if err != nil {
		return nil, exitcode.Usagef("--metrics-listen %q: %w", m.listen, err)
	}
	_, _ = stderr.Write([]byte("metrics: http://" + srv.Addr() + "/metrics\n"))
	return srv, nil
}
