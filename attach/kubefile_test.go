package attach

import (
	"strings"
	"testing"
)

// A kubernetes: block is read whole (every key), stands for the file's
// engines, and each missing or conflicting key is named with its line.
func TestKubernetesBlockIsReadAndChecked(t *testing.T) {
	f, err := Parse("k.yaml", []byte(`model: meta-llama/Llama-3.2-1B-Instruct
mode: pd
kubernetes:
  kubeconfig: /tmp/kc
  context: kind
  namespace: llm-d
  sources: llm-d.ai/role=prefill
  decoder: llm-d.ai/role=decode
  container: vllm
  http_port: "8000"
  p2p_port: p2p
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Kubernetes{Kubeconfig: "/tmp/kc", Context: "kind", Namespace: "llm-d", Sources: "llm-d.ai/role=prefill", Decoder: "llm-d.ai/role=decode", Container: "vllm", HTTPPort: "8000", P2PPort: "p2p", Line: 4}
	if f.Kubernetes == nil || *f.Kubernetes != want || f.Model != "meta-llama/Llama-3.2-1B-Instruct" || f.Mode != "pd" || len(f.Sources) != 0 {
		t.Errorf("parsed %+v (kubernetes %+v), want %+v", f, f.Kubernetes, want)
	}
	for _, tt := range []struct{ body, want string }{
		{"model: m\nkubernetes:\n  sources: a=b\n  decoder: c=d\n", "k.yaml:3: kubernetes.namespace: missing"},
		{"model: m\nkubernetes:\n  namespace: n\n  sources: a=b\n", "kubernetes.decoder: missing"},
		{"kubernetes:\n  namespace: n\n  sources: a=b\n  decoder: c=d\n", "model: missing"},
		{"model: m\nkubernetes:\n  namespace: n\n  sources: a=b\n  decoder: c=d\nsources:\n  - name: s\n    url: http://127.0.0.1:1\n    p2p: 127.0.0.1:2\n    faults: local\n", "lists no sources, decoder or decoders beside it"},
		{"model: m\nkubernetes:\n  namespace: n\n  sources: a=b\n  decoder: c=d\nrestore_at_end: true\n", "restore_at_end: not with kubernetes:"},
	} {
		if _, err := Parse("k.yaml", []byte(tt.body)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error naming %q", tt.body, err, tt.want)
		}
	}
}
