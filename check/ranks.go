package check

import (
	"cmp"
	"slices"

	"p2pfault/event"
)

// Parts of a source's pulls in a per-rank breakdown (event.RankSummary):
// by what they were to the source's own fault windows.
const (
	PartFault    = "fault"    // started in a fault window on the source
	PartRecovery = "recovery" // started in its recovery window
	PartOutside  = "outside"  // neither: its steady state, or another source's window
)

// rankKey is one row of the breakdown: a rank's pulls (rank 0 of a
// source of one) through one decoder (0 in a run of one).
type rankKey struct {
	source, rank, decoder int
	part                  string
}

// partOf is the part a pull of category c (assign's, for its own source)
// is in.
func partOf(c category) string {
	switch c {
	case catFaulted:
		return PartFault
	case catRecovery:
		return PartRecovery
	}
	return PartOutside
}

// ranked says whether src has several data-parallel ranks or the run
// several decoders (a breakdown is kept for it).
func (j *Judge) ranked(src int) bool { return event.RanksOf(j.ranks, src) > 1 || j.decoders > 1 }

// placeRank counts s in its source's rank and decoder breakdown, through
// t (nil figures: not counted).
func (j *Judge) placeRank(s event.Sample, c category, t tally) {
	if !j.ranked(s.Source) {
		return
	}
	if f := t.rankFigs(rankKey{s.Source, s.Rank, s.Decoder, partOf(c)}); f != nil {
		f.Add(s)
	}
}

// figsAt is the figures of k in m, made on first use from base's (nil:
// empty).
func figsAt(m map[rankKey]*Figures, k rankKey, base map[rankKey]*Figures) *Figures {
	f := m[k]
	if f == nil {
		f = NewFigures()
		if o := base[k]; o != nil {
			f = o.clone()
		}
		m[k] = f
	}
	return f
}

// rankSummaries is the breakdown of every ranked source, the pulls the
// verdict counts added (counted: nil for none), by source, part, rank.
func (j *Judge) rankSummaries(counted map[rankKey]*Figures) []event.RankSummary {
	keys := map[rankKey]*Figures{}
	for k, f := range j.byRank {
		keys[k] = f
	}
	for k, f := range counted {
		keys[k] = f
	}
	out := make([]event.RankSummary, 0, len(keys))
	for k, f := range keys {
		out = append(out, event.RankSummary{Rank: k.rank, Decoder: k.decoder, Part: k.part, SourceSummary: f.Summary(k.source)})
	}
	order := map[string]int{PartFault: 0, PartRecovery: 1, PartOutside: 2}
	slices.SortFunc(out, func(a, b event.RankSummary) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(order[a.Part], order[b.Part]), cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Decoder, b.Decoder))
	})
	return out
}
