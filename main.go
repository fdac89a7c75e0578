// Command p2pfault runs fault experiments on vLLM's peer-to-peer KV-offload
// tier: a dashboard, a headless slice for CI, and a simulated engine.
package main

import (
	"os"

	"p2pfault/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
