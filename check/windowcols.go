package check

// WindowColumn is one check's column in a table of fault windows: the
// check's name and the column's head.
type WindowColumn struct{ Name, Head string }

// WindowColumns are the checks a fault window's line shows, in this
// order, with their heads: the one list of the report's per-window table
// and the dashboard's fault by fault panel, so that a mark on the
// dashboard reads as the report's column, worded as the check's name in
// a failure line (faulted_max, all_200) with the long names shortened.
var WindowColumns = []WindowColumn{
	{NameAll200, "all_200"},
	{NameFaultedBound, "faulted_max"},
	{NameFaultedMedian, "median"},
	{NameHealthy, "healthy"},
	{NameRecovery, "recovery"},
	{NameFaultTookEffect, "took_effect"},
}
