package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"p2pfault/cli"
)

// An attach file's kubernetes: block is --kube and its flags: a run on it
// reaches for the API server its kubeconfig names (here a file that is
// not one: the error names it, through --kube), and beside it a --kube-*
// flag or --model is a usage error naming the flag; a block missing a
// selector names the key and its line.
func TestAttachFilesKubernetesBlockIsKube(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kc := write("not-a-kubeconfig", "this: is: not: yaml: [")
	good := write("kube.yaml", "model: meta-llama/Llama-3.2-1B-Instruct\nkubernetes:\n  kubeconfig: "+kc+"\n  namespace: llm-d\n  sources: llm-d.ai/role=prefill\n  decoder: llm-d.ai/role=decode\n")
	bad := write("bad.yaml", "model: m\nkubernetes:\n  namespace: llm-d\n  decoder: llm-d.ai/role=decode\n")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--headless", "--attach", good, "--case", "stall"}, "--kube: kubeconfig: "},
		{[]string{"slice", "--attach", good, "--cases", "stall"}, "--kube: kubeconfig: "},
		{[]string{"run", "--headless", "--attach", good, "--kube-namespace", "x"}, "--kube-namespace would say it again"},
		{[]string{"run", "--headless", "--attach", good, "--model", "x"}, "--model would say it again"},
		{[]string{"run", "--headless", "--attach", good, "--sources", "2"}, "--kube: --sources launch engines"},
		{[]string{"run", "--headless", "--attach", bad}, "bad.yaml:3: kubernetes.sources: missing"},
	} {
		var stdout, stderr bytes.Buffer
		args := append(tt.args, "--out", filepath.Join(t.TempDir(), "out"))
		if code := cli.Main(args, strings.NewReader(""), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("p2pfault %s: exit %d, stderr %q; want 2 naming %q", strings.Join(tt.args, " "), code, stderr.String(), tt.want)
		}
	}
}
