package ui

import "p2pfault/probe"

// maxInflight bounds the pulls tracked per source, so a stream whose pulls
// never end (or a malformed one) cannot grow the dashboard without bound.
const maxInflight = 4096

// pulls are the pulls sent and not yet ended, per source, by trial: a
// started event adds them, their sample removes them.
type pulls struct {
	by map[int]map[int64]struct{}
}

func (p *pulls) started(ps []probe.PullStart) {
	if p.by == nil {
		p.by = map[int]map[int64]struct{}{}
	}
	for _, s := range ps {
		if s.Source < 0 || s.Source >= maxSources {
			continue
		}
		m := p.by[s.Source]
		if m == nil {
			m = map[int64]struct{}{}
			p.by[s.Source] = m
		}
		if len(m) < maxInflight {
			m[s.Trial] = struct{}{}
		}
	}
}

func (p *pulls) ended(ss []probe.Sample) {
	for _, s := range ss {
		delete(p.by[s.Source], s.Trial)
	}
}

// count is how many pulls naming source i are in flight.
func (p *pulls) count(i int) int { return len(p.by[i]) }

// clear forgets every pull: the run ended, nothing is in flight.
func (p *pulls) clear() { p.by = nil }
