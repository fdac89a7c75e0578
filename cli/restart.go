package cli

import "time"

// DefaultRestartLength is a real vLLM restart of Llama-3.2-1B from SIGKILL
// to ready: the seed's kill row saw n = 58 pulls at 2 trials/s in that
// window, so ~29 s. The simulated engine waits this long on a restart (and
// ~1 s on a first start, so p2pfault opens fast).
const DefaultRestartLength = 29 * time.Second
