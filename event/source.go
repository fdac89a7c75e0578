package event

import "strconv"

// SourceName is source i's name, "source-0": the one spelling of it that
// the timeline, the keys, the runner's engines, the faces and the
// reports share. It lives here because every package reads the event
// stream and none is below it, so no import cycle can stand in the way.
func SourceName(i int) string { return "source-" + strconv.Itoa(i) }

// RankName is rank r of source i's name, "source-0/rank1": one
// data-parallel engine core of a source, as the timeline, the keys and the
// faces name it (a source's name alone is the whole engine).
func RankName(i, r int) string { return SourceName(i) + "/rank" + strconv.Itoa(r) }

// TargetName is SourceName(i) when rank is negative (the whole engine),
// else RankName(i, rank).
func TargetName(i, rank int) string {
	if rank < 0 {
		return SourceName(i)
	}
	return RankName(i, rank)
}

// DecoderName is decoder d's name in a run of n decoders: "decoder"
// when it is the only one (every run before --decoders, so their streams
// and names stay), else "decoder-d".
func DecoderName(d, n int) string {
	if n <= 1 {
		return "decoder"
	}
	return "decoder-" + strconv.Itoa(d)
}

// RanksOf is source i's number of data-parallel ranks by ranks (a run's
// RunInfo.SourceRanks): 1 when it names none.
func RanksOf(ranks []int, i int) int {
	if i < 0 || i >= len(ranks) || ranks[i] < 1 {
		return 1
	}
	return ranks[i]
}
