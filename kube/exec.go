package kube

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// execer runs commands in pods' containers through the API server:
// WebSocket first, SPDY when the server does not upgrade to it (the
// fallback kubectl uses).
type execer struct {
	cs *clientset
	rc *rest.Config
}

// execTimeout bounds one exec, whatever the caller's context: an exec
// the API server, the kubelet or the container never ends (a stream left
// open, a node gone) must not hold a stall's undo or a run's end with it.
// An exec here reads /proc or sends signals: well under a second when
// the cluster is well.
const execTimeout = 20 * time.Second

// run runs argv in container k of pod ns/name and returns its stdout; an
// error carries its stderr.
func (e execer) run(ctx context.Context, ns, name, k string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, execTimeout)
	defer cancel()
	req := e.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: k, Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(e.rc, "GET", req.URL().String())
	if err != nil {
		return "", fmt.Errorf("exec in pod %s: %w", name, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(e.rc, "POST", req.URL())
	if err != nil {
		return "", fmt.Errorf("exec in pod %s: %w", name, err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", fmt.Errorf("exec in pod %s: %w", name, err)
	}
	var out, errb bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}); err != nil {
		return out.String(), fmt.Errorf("exec %s in pod %s container %s: %w: %s", argv[0], name, k, err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// procs reads the container's process tree.
func (e execer) procs(ctx context.Context, ns, name, k string) (procs, error) {
	out, err := e.run(ctx, ns, name, k, "sh", "-c", listScript)
	if err != nil {
		return procs{}, fmt.Errorf("read the processes: %w", err)
	}
	ps, err := parseProcs(out)
	if err != nil {
		return procs{}, fmt.Errorf("pod %s container %s: %w", name, k, err)
	}
	return ps, nil
}

// signal sends sig (STOP, CONT, KILL) to the processes ps from inside the
// container, each only if it is still the process that was read
// (signalScript): one that has exited since is not an error.
func (e execer) signal(ctx context.Context, ns, name, k, sig string, ps []proc) error {
	if len(ps) == 0 {
		return fmt.Errorf("pod %s container %s: no engine process to send SIG%s to", name, k, sig)
	}
	if _, err := e.run(ctx, ns, name, k, append([]string{"sh", "-c", signalScript, "sh", sig}, ids(ps)...)...); err != nil {
		return fmt.Errorf("send SIG%s: %w", sig, err)
	}
	return nil
}
