package fault_test

import (
	"strings"
	"testing"
	"time"

	"p2pfault/event"
	"p2pfault/exitcode"
	"p2pfault/fault"
)

func TestParseReadsNetworkSteps(t *testing.T) {
	text := "at 10s partition source-0 for 30s; at 10s loss 30% source-1 for 20s; at 45s heal source-1; at 50s partition source-2"
	tl, err := fault.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	want := fault.Timeline{
		{At: 10 * time.Second, Action: fault.Action{Kind: kind("partition"), Source: 0, Options: fault.Options{For: 30 * time.Second}}, Line: 1, Col: 1},
		{At: 10 * time.Second, Action: fault.Action{Kind: kind("loss"), Source: 1, Options: fault.Options{For: 20 * time.Second, Arg: "30%"}}, Line: 1, Col: 36},
		{At: 45 * time.Second, Action: fault.Action{Kind: kind("heal"), Source: 1}, Line: 1, Col: 70},
		{At: 50 * time.Second, Action: fault.Action{Kind: kind("partition"), Source: 2}, Line: 1, Col: 92},
	}
	if len(tl) != len(want) {
		t.Fatalf("Parse = %+v", tl)
	}
	for i := range want {
		if tl[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, tl[i], want[i])
		}
	}
	// The argument is written back where it was read.
	back := "at 10s partition source-0 for 30s; at 10s loss 30% source-1 for 20s; at 45s heal source-1; at 50s partition source-2"
	if got := tl.String(); got != back {
		t.Errorf("String() = %q, want %q", got, back)
	}
}

func TestParseNamesBadNetworkSteps(t *testing.T) {
	for _, tt := range []struct{ name, text, want string }{
		{"loss without a share", "at 1s loss source-0", `timeline:1:12: loss "source-0": want a share such as 30% (a whole number and %)`},
		{"share without its sign", "at 1s loss 30 source-0", `timeline:1:12: loss "30": want a share such as 30%`},
		{"share of 0", "at 1s loss 0% source-0", `timeline:1:12: loss "0%": want a share from 1% to 99% (100% is a partition)`},
		{"share of 100", "at 1s loss 100% source-0", `loss "100%": want a share from 1% to 99% (100% is a partition)`},
		{"fraction", "at 1s loss 2.5% source-0", `loss "2.5%": want a share such as 30%`},
		{"loss with nothing after", "at 1s loss", `timeline:1:11: missing a share such as 30% after "at 1s loss"`},
		{"loss without a target", "at 1s loss 30%", `timeline:1:15: missing a target after "at 1s loss 30%"`},
		{"heal for", "at 1s heal source-0 for 2s", `timeline:1:21: "for" goes only with stall, partition, loss, busy, mute, hold-ack, drop, delay, late-fetch, latency, bandwidth, reset, slow-close, half-open, ack-withheld, fetch-lost, slow-link, not heal`},
		{"partition with a share", "at 1s partition 30% source-0", `timeline:1:17: bad target "30%"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fault.Parse(tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) = %v, want %q", tt.text, err, tt.want)
			}
			if exitcode.Code(err) != exitcode.Usage {
				t.Errorf("exit code %d, want %d", exitcode.Code(err), exitcode.Usage)
			}
		})
	}
}

func TestPartitionPresetAndHealRefusal(t *testing.T) {
	tl, err := fault.Preset("partition", 10*time.Second, 30*time.Second)
	if err != nil || tl.String() != "at 10s partition source-0 for 30s" {
		t.Fatalf("Preset(partition) = %q, %v", tl, err)
	}
	heal, _ := fault.Lookup(fault.ActionHeal)
	part, _ := fault.Lookup(fault.ActionPartition)
	stall, _ := fault.Lookup(fault.ActionStall)
	for _, tt := range []struct {
		k    *fault.Kind
		c    event.Condition
		want string
	}{
		{heal, event.CondUp, "source-0 is not faulted on the network"},
		{heal, event.CondNetwork, ""},
		{part, event.CondNetwork, "source-0 is already faulted on the network; press h to heal it"},
		{stall, event.CondNetwork, "source-0 is faulted on the network; press h to heal it"},
		{part, event.CondStalled, "source-0 is stalled; press c to resume it"},
	} {
		if got := tt.k.Refusal("source-0", tt.c); got != tt.want {
			t.Errorf("%s over %q: %q, want %q", tt.k.Name, tt.c, got, tt.want)
		}
	}
}
