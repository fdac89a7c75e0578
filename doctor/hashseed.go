package doctor

import (
	"fmt"
	"slices"
	"strings"
)

// HashSeedVar seeds the block hashes; peers must share it (reference §1:
// one vLLM version's manager raises at startup when it is unset, newer
// ones reject a peer with another seed at the handshake, "hash seed
// mismatch"; either way no pull hits).
const HashSeedVar = "PYTHONHASHSEED"

// HashSeed checks the PYTHONHASHSEED the run's engines get: the runner
// sets one value on every engine, on top of p2pfault's own environment,
// so a different PYTHONHASHSEED in that environment is overridden — and
// engines started by hand with it (to compare, or to attach) would share
// no block with the run's.
func HashSeed(h Host, clusters []Cluster) []Result {
	var seeds []string
	engines := 0
	for _, c := range clusters {
		for _, s := range c.Specs {
			engines++
			v, ok := envValue(s.Env, HashSeedVar)
			if !ok {
				v = "unset"
			}
			if !slices.Contains(seeds, v) {
				seeds = append(seeds, v)
			}
		}
	}
	if engines == 0 {
		return nil
	}
	r := Result{Check: HashSeedVar}
	if len(seeds) != 1 || seeds[0] == "unset" {
		r.Found = fmt.Sprintf("the run's engines would start with %s %s", HashSeedVar, strings.Join(seeds, ", "))
		r.Fix = "give every engine one PYTHONHASHSEED"
		return []Result{r}
	}
	seed := seeds[0]
	user, set := h.LookupEnv(HashSeedVar)
	switch {
	case !set:
		r.OK, r.Found = true, fmt.Sprintf("p2pfault starts all %s with %s=%s (unset in your environment)", plural(engines, "engine"), HashSeedVar, seed)
	case user == seed:
		r.OK, r.Found = true, fmt.Sprintf("p2pfault starts all %s with %s=%s, as your environment has it", plural(engines, "engine"), HashSeedVar, seed)
	default:
		r.Found = fmt.Sprintf("your environment has %s=%s, but p2pfault starts every engine with %s=%s (peers must share one seed, so the run overrides yours): engines you start with %s share no block with the run's",
			HashSeedVar, user, HashSeedVar, seed, user)
		r.Fix = fmt.Sprintf("unset %s, or set it to %s", HashSeedVar, seed)
	}
	return []Result{r}
}
