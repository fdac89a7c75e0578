package fault

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"p2pfault/event"
	"p2pfault/netfault"
)

// ActionLoss drops a share of the packets to or from a source's ports, each
// at random, for a duration or until heal: `loss 30% source-0 for 20s`.
const ActionLoss = "loss"

func init() {
	Register(&Kind{
		Ranks: RankAlone,
		Name:  ActionLoss, Help: "loss", LongHelp: "drop P% of packets", Order: 65,
		TakesFor: true, Arg: &Arg{Name: "a share such as 30%", Check: func(s string) error { _, err := ParsePercent(s); return err }},
		Needs: event.CondUp, Leaves: event.CondNetwork, Badge: "LOSSY",
		Opens: true, Ending: EndsAfterFor, Pairs: true,
		Act: func(f *Fire) error {
			pct, err := ParsePercent(f.Arg)
			if err != nil {
				err = fmt.Errorf("loss %s: %w", f.Target.Name(), err)
				f.Env.Record(ActionLoss, f.For, f.By, err)
				return err
			}
			return actNet(f, ActionLoss, pct)
		},
		Verify: verifyLoss,
		Setup:  func() error { return netfault.Check(ActionLoss) }, HostFirewall: true,
		Can: canNet,
	})
}

// CutVerifier is a Target whose cluster can read back the network fault
// it holds on it (a Kubernetes cluster's NetworkChaos object): its
// Effect's After is when it saw it. A share of packets lost shows in no
// single connect, so on other clusters a loss is not verified (no
// verification event).
type CutVerifier interface {
	VerifyCut(ctx context.Context) Effect
}

// verifyLoss is a CutVerifier's word on a source's loss.
func verifyLoss(f *Fire) Effect {
	cv, ok := f.Target.(CutVerifier)
	if !ok || f.Peer != "" {
		return Effect{Skipped: true}
	}
	return cv.VerifyCut(f.Env.Context())
}

// ParsePercent reads a loss share: a whole number of percent from 1% to
// 99%, written with its sign ("30%"); 100% is a partition.
func ParsePercent(s string) (int, error) {
	n, ok := strings.CutSuffix(s, "%")
	v, err := strconv.Atoi(n)
	switch {
	case !ok || err != nil || n != strconv.Itoa(v):
		return 0, fmt.Errorf("want a share such as 30%% (a whole number and %%)")
	case v < 1 || v > 99:
		return 0, fmt.Errorf("want a share from 1%% to 99%% (100%% is a partition)")
	}
	return v, nil
}
