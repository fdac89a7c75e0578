package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"p2pfault/engineargs"
	"p2pfault/experiment"
	"p2pfault/fault"
)

// A source pod's engine started with --data-parallel-size N (or -dp N)
// in its container's command or args has N ranks, rank r's P2P port at
// the pod's P2P port + r (vLLM #47636; llm-d's `base + rank`): the probe
// pins its trials to each rank, as on a launched or attached cluster. A
// fault of one rank alone is refused (see RankTarget).

var _ experiment.Ranked = (*Target)(nil)

// maxRanks bounds a pod's data-parallel size, as --source-dp's cap does
// a launched source's (runner.MaxSourceDP).
const maxRanks = 16

// ranksOf is the data-parallel size the engine's container k of pod p is
// started with (1 without), its P2P ports p2pPort..p2pPort+N-1.
func ranksOf(p corev1.Pod, k corev1.Container, p2pPort int) (int, error) {
	argv := append(append([]string{}, k.Command...), k.Args...)
	n, err := engineargs.Int(argv, 1, engineargs.DataParallelSize...)
	if err == nil && (n > maxRanks || p2pPort+n-1 > 65535) {
		err = fmt.Errorf("%s %d: want 1 to %d data-parallel ranks, their P2P ports %d..%d+ranks-1 within 65535", engineargs.DataParallelSize[0], n, maxRanks, p2pPort, p2pPort)
	}
	if err != nil {
		return 0, fmt.Errorf("pod %s: container %s's arguments: %w", p.Name, k.Name, err)
	}
	return n, nil
}

// placeOf is where pod p's engine runs: its container, addresses and
// ranks.
func (c Config) placeOf(p corev1.Pod) (*place, error) {
	k, err := c.container(p)
	if err != nil {
		return nil, err
	}
	ip, hp, pp, err := c.address(p)
	if err != nil {
		return nil, err
	}
	n, err := ranksOf(p, k, pp)
	if err != nil {
		return nil, err
	}
	return &place{pod: p.Name, container: k.Name, ip: ip, httpPort: hp, p2pPort: pp, ranks: n}, nil
}

// planRanks are the sources' ranks as a Plan gives them (PlanRanks).
func (c Config) planRanks(srcs []corev1.Pod) ([]int, error) {
	counts := make([]int, len(srcs))
	for i, p := range srcs {
		k, err := c.container(p)
		if err != nil {
			return nil, err
		}
		// The P2P port's bound is checked at Open, which reads it.
		if counts[i], err = ranksOf(p, k, 0); err != nil {
			return nil, err
		}
	}
	return experiment.PlanRanks(counts), nil
}

// Ranks is the engine's data-parallel size (1 without).
func (t *Target) Ranks() int { return max(t.where().ranks, 1) }

// RankTarget refuses: a stall or kill by exec acts on the pod's whole
// process tree, and telling one rank's engine core apart inside the
// container (its process title, EngineCore_DP<r>) is not done yet, so a
// fault of one rank would reach all of them.
func (t *Target) RankTarget(r int) (fault.Target, error) {
	return nil, fmt.Errorf("%s/rank%d: a fault of one data-parallel rank is not supported on --kube yet (a fault by exec reaches the whole pod): name the source, %s", t.name, r, t.name)
}
