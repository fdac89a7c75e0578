package scrape

import (
	"strings"
	"testing"
)

// FuzzParse: any body parses or fails without a panic, and the line filter
// in front of the parser never changes what a body that parses reads.
func FuzzParse(f *testing.F) {
	f.Add(vllmText)
	f.Add(noneText)
	f.Add("vllm:num_requests_waiting{model_name=\"m\"} 3\n")
	f.Add("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 1\nvllm:num_requests_waiting 2\n")
	f.Add("<html></html>")
	f.Fuzz(func(t *testing.T, body string) {
		full, errFull := parse(strings.NewReader(body), textFormat, false)
		got, err := Parse(strings.NewReader(body), textFormat)
		if errFull == nil && (err != nil || got != full) {
			t.Errorf("filtered %+v, %v; unfiltered %+v", got, err, full)
		}
	})
}
