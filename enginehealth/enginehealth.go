// Package enginehealth asks an engine's GET /health, the readiness every
// engine p2pfault watches answers (vllm serve's and the sim's alike).
package enginehealth

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// Ask asks base's /health once through client: nil when it answers 200.
func Ask(ctx context.Context, client *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	// Drained, so the connection can serve the next ask.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/health answered %s", resp.Status)
	}
	return nil
}
