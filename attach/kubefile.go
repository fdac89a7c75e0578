package attach

import (
	"strings"
)

// Kubernetes is an attach file's `kubernetes:` block: the engines are
// pods of a Kubernetes cluster, found by label, as `--kube` and its flags
// say (docs/kubernetes.md): run and slice take the file as those flags.
// The block stands for the file's sources and decoder, which it then
// does not list.
type Kubernetes struct {
	Kubeconfig, Context string // "": kubectl's rules, its current context
	Namespace           string
	Sources, Decoder    string // label selectors
	Container           string // "": the pod's first
	HTTPPort, P2PPort   string // port names or numbers; "": http and p2p
	Line                int    // the line of the block's first key, for later messages
}

type rawKube struct {
	Kubeconfig string `yaml:"kubeconfig"`
	Context    string `yaml:"context"`
	Namespace  string `yaml:"namespace"`
	Sources    string `yaml:"sources"`
	Decoder    string `yaml:"decoder"`
	Container  string `yaml:"container"`
	HTTPPort   string `yaml:"http_port"`
	P2PPort    string `yaml:"p2p_port"`
}

// kubernetes checks a file with a `kubernetes:` block: its model, its
// mode, the block's required keys, and no engine listed beside it (the
// selectors find them). The selectors' syntax is the kube package's to
// check, as it checks --kube-sources'.
func (c fileChecker) kubernetes(raw rawFile) (*File, error) {
	k := raw.Kubernetes
	if err := c.modelMode(raw); err != nil {
		return nil, err
	}
	switch {
	case raw.Decoder.URL != "" || len(raw.Decoders) > 0 || len(raw.Sources) > 0:
		return nil, c.bad("$.kubernetes", "kubernetes: the pods are found by its selectors, so the file lists no sources, decoder or decoders beside it: drop them, or the block")
	case raw.RestoreAtEnd:
		return nil, c.bad("$.restore_at_end", "restore_at_end: not with kubernetes: (a pod is not removed: see docs/kubernetes.md)")
	}
	for _, req := range []struct{ key, v, what string }{
		{"namespace", k.Namespace, "the namespace the engines' pods run in"},
		{"sources", k.Sources, "a label selector of the source pods, e.g. llm-d.ai/role=prefill"},
		{"decoder", k.Decoder, "a label selector of the decoder pods, e.g. llm-d.ai/role=decode"},
	} {
		if strings.TrimSpace(req.v) == "" {
			return nil, c.bad("$.kubernetes", "kubernetes.%s: missing (%s)", req.key, req.what)
		}
	}
	return &File{Path: c.name, Model: raw.Model, Mode: raw.Mode, Kubernetes: &Kubernetes{
		Kubeconfig: k.Kubeconfig, Context: k.Context, Namespace: k.Namespace, Sources: k.Sources, Decoder: k.Decoder,
		Container: k.Container, HTTPPort: k.HTTPPort, P2PPort: k.P2PPort, Line: c.at("$.kubernetes"),
	}}, nil
}
