package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"p2pfault/runner"
	"p2pfault/sim"
)

// The control plane every test of this package shares (started once, in
// TestMain: etcd, kube-apiserver, kwok on loopback free ports, stopped
// apiserver before etcd, each by pid), and the engines its pods stand for.
var plane struct {
	skip       string // why the tests skip: no control plane binaries
	kubeconfig string
	ns         string
	engines    map[string]*podEngine // by pod name
}

// Re-exec conventions of this test binary: sim.StandaloneEnv=1 acts as
// `p2pfault sim`; cutterEnv=POD acts as a p2pfault that partitions the
// pod's engine, prints "cut" and waits to be SIGKILLed.
const cutterEnv = "P2PFAULT_TEST_KUBE_CUTTER"

// cutterLossEnv=1 makes the cutter put a loss on too (TestSIGKILLMidLoss...).
const cutterLossEnv = "P2PFAULT_TEST_KUBE_CUTTER_LOSS"

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(sim.StandaloneEnv) == "1":
		os.Exit(sim.RunStandalone(os.Args[1:]))
	case os.Getenv(cutterEnv) != "":
		os.Exit(cutter(os.Getenv(cutterEnv)))
	}
	stop, err := startPlane()
	if err != nil {
		plane.skip = err.Error()
	}
	if f := os.Getenv(holdEnv); f != "" {
		os.Exit(hold(f, stop, err))
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// holdEnv=FILE runs no test: the control plane and its pods stay up for
// a person to run p2pfault against (docs/testing.md), FILE says where its
// kubeconfig is, and SIGINT or SIGTERM stops them, each by pid.
const holdEnv = "P2PFAULT_KUBE_HOLD"

func hold(file string, stop func(), err error) int {
	defer stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube hold:", err)
		return 1
	}
	if err := os.WriteFile(file, []byte(plane.kubeconfig+"\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "kube hold:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "kube hold: kubeconfig %s (named in %s); namespace %s; pods src-a, src-b (llm-d.ai/role=prefill), dec (decode), pid1 (pid1), rep-a (replica: its controller makes rep-b when it is deleted); engines at --time-scale %g; SIGINT or SIGTERM ends it\n", plane.kubeconfig, file, plane.ns, podTimeScale)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return 0
}

// needPlane skips t without the control plane.
func needPlane(t *testing.T) {
	t.Helper()
	if plane.skip != "" {
		t.Skip(plane.skip)
	}
}

// binDir is where tools/kube-controlplane.sh put the binaries.
func binDir() (string, error) {
	if d := os.Getenv("P2PFAULT_KUBE_BIN"); d != "" {
		return d, nil
	}
	out, err := exec.Command("bash", "../tools/kube-controlplane.sh", "--dir").Output()
	return strings.TrimSpace(string(out)), err
}

// started is a process the plane started, ended by pid.
type started struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *started) stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// startProc starts a plane process with its output to dir/name.log; it
// dies with this process (Pdeathsig) if the test binary crashes.
func startProc(dir, name string, env []string, argv ...string) (*started, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &started{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.done) }()
	return s, nil
}

// freePort is a loopback port that was free a moment ago, never handed
// out twice by this process.
func freePort() int {
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !handed[p] {
			handed[p] = true
			return p
		}
	}
}

var handed = map[int]bool{}

// startPlane starts the engines, etcd, the API server and kwok, makes the
// node, the pods and their exec mapping; stop ends them in reverse
// order, by pid, also when a step failed.
func startPlane() (stop func(), err error) {
	var procs []*started
	stop = func() {
		for i := len(procs) - 1; i >= 0; i-- { // kwok, apiserver, then etcd
			procs[i].stop()
		}
		for _, e := range plane.engines {
			e.stop()
		}
	}
	bin, err := binDir()
	if err != nil || bin == "" {
		return stop, fmt.Errorf("no control plane: tools/kube-controlplane.sh --dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(bin, "ok")); err != nil {
		return stop, fmt.Errorf("no control plane binaries in %s (build them: tools/kube-controlplane.sh; .ci/run does)", bin)
	}
	dir, err := os.MkdirTemp("", "p2pfault-kube-")
	if err != nil {
		return stop, err
	}
	ended := stop
	stop = func() { ended(); os.RemoveAll(dir) }
	t0 := time.Now()
	defer func() {
		if err != nil {
			b, _ := exec.Command("sh", "-c", "tail -n 20 "+dir+"/*.log").CombinedOutput()
			err = fmt.Errorf("%w\n%s", err, b)
		}
	}()
	if err := startEngines(dir); err != nil {
		return stop, err
	}
	ep, pp := freePort(), freePort()
	e, err := startProc(dir, "etcd", nil, filepath.Join(bin, "etcd"), "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:"+strconv.Itoa(ep), "--advertise-client-urls", "http://127.0.0.1:"+strconv.Itoa(ep),
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(pp), "--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(pp),
		"--initial-cluster", "default=http://127.0.0.1:"+strconv.Itoa(pp), "--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return stop, err
	}
	procs = append(procs, e)
	a, err := startAPIServer(dir, bin, ep)
	if err != nil {
		return stop, err
	}
	procs = append(procs, a)
	cs, err := (Config{Kubeconfig: plane.kubeconfig}).clientset()
	if err != nil {
		return stop, err
	}
	if err := waitAPI(cs, a); err != nil {
		return stop, err
	}
	k, err := startKwok(dir, bin, cs)
	if err != nil {
		return stop, err
	}
	procs = append(procs, k)
	if err := makePods(cs); err != nil {
		return stop, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go replicaSlots(ctx, cs)
	kwokStop := stop
	stop = func() { cancel(); kwokStop() }
	fmt.Fprintf(os.Stderr, "kube tests: control plane and pods up in %v (%s)\n", time.Since(t0).Round(time.Millisecond), dir)
	return stop, nil
}

// clientset is client-go's whole Clientset for c's kubeconfig: the tests
// also make nodes and Roles, which a run never does.
func (c Config) clientset() (*kubernetes.Clientset, error) {
	_, rc, err := c.client()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// startAPIServer writes its keys, a token file (admin: system:masters;
// noexec: no group, for doctor) and a kubeconfig, and starts it.
func startAPIServer(dir, bin string, etcdPort int) (*started, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err == nil {
			err = os.WriteFile(p, data, 0o600)
		}
		return p
	}
	sk := write("sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	pk := write("sa.pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	tokens := write("tokens.csv", []byte("admin-token,admin,1,system:masters\nnoexec-token,noexec,2\n"))
	port := freePort()
	server := "https://127.0.0.1:" + strconv.Itoa(port)
	plane.kubeconfig = write("kubeconfig", []byte(kubeconfig(server, "admin-token")))
	write("kubeconfig-noexec", []byte(kubeconfig(server, "noexec-token")))
	if err != nil {
		return nil, err
	}
	return startProc(dir, "kube-apiserver", nil, filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers", "http://127.0.0.1:"+strconv.Itoa(etcdPort),
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(dir, "certs"), "--token-auth-file", tokens, "--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", pk,
		"--service-account-signing-key-file", sk, "--service-cluster-ip-range", "10.0.0.0/24",
		"--disable-admission-plugins", "ServiceAccount", "--kubelet-preferred-address-types", "InternalIP",
		"--enable-priority-and-fairness=false", "--v", "0")
}

func kubeconfig(server, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: t, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: t, context: {cluster: t, user: u}}]
current-context: t
`, server, token)
}

// waitAPI waits until the API server answers and has its default
// namespace.
func waitAPI(cs kubernetes.Interface, a *started) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		_, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		select {
		case <-a.done:
			return fmt.Errorf("kube-apiserver exited")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after 90s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// selfSigned writes a serving certificate for kwok's kubelet endpoint
// (the API server dials it over TLS, without verifying it).
func selfSigned(dir string) (cert, key string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kwok"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", err
	}
	kd, _ := x509.MarshalECPrivateKey(k)
	cert, key = filepath.Join(dir, "kwok.crt"), filepath.Join(dir, "kwok.key")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return cert, key, os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600)
}

// startKwok writes its configuration (one Exec per pod: a command run in
// the pod runs here, with P2PFAULT_KUBE_INIT naming the pod's engine
// tree) and starts it managing every node.
func startKwok(dir, bin string, cs kubernetes.Interface) (*started, error) {
	cert, key, err := selfSigned(dir)
	if err != nil {
		return nil, err
	}
	var cfg strings.Builder
	cfg.WriteString("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions: {}\n")
	for pod, e := range plane.engines {
		fmt.Fprintf(&cfg, "---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: Exec\nmetadata: {name: %s, namespace: %s}\nspec:\n  execs:\n  - local:\n      envs: [{name: %s, value: %q}]\n",
			pod, plane.ns, InitEnv, strconv.Itoa(e.init))
	}
	path := filepath.Join(dir, "kwok.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		return nil, err
	}
	port := freePort()
	k, err := startProc(dir, "kwok", nil, filepath.Join(bin, "kwok"), "--kubeconfig", plane.kubeconfig, "--config", path,
		"--manage-all-nodes", "--node-ip", "127.0.0.1", "--node-port", strconv.Itoa(port),
		"--server-address", "127.0.0.1:"+strconv.Itoa(port), "--tls-cert-file", cert, "--tls-private-key-file", key)
	if err != nil {
		return nil, err
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node", Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}}
	if _, err := cs.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		return k, fmt.Errorf("create node: %w", err)
	}
	return k, nil
}

// podTimeScale is the pods' engines' --sim-time-scale: a run against them
// gives the seed's verdicts at the same --time-scale (TestARunOnThePods...,
// and a person's run against the held cluster).
const podTimeScale = 0.25

// podEngine is the engine a pod stands for: a simulated engine this test
// started, under a shell that restarts it when killed (the container's
// init, as tini would be), or alone (it is the pod's "PID 1").
type podEngine struct {
	pod, role string
	http, p2p int
	init      int // the pod's init: the shell, or the engine itself
	created   time.Time
	cmd       *exec.Cmd
	done      chan struct{}
}

func (e *podEngine) stop() {
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL) // its session, by id
	<-e.done
}

// killBelowInit kills the engine's processes below its shell, read from
// this host's /proc, each by pid.
func (e *podEngine) killBelowInit() {
	cmd := exec.Command("sh", "-c", listScript)
	cmd.Env = append(os.Environ(), InitEnv+"="+strconv.Itoa(e.init))
	out, err := cmd.Output()
	if err != nil {
		return
	}
	if ps, err := parseProcs(string(out)); err == nil {
		for _, p := range ps.engine() {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}

func (e *podEngine) url() string { return "http://127.0.0.1:" + strconv.Itoa(e.http) }

// The pods: two sources and a decoder under a shell, a source whose
// engine is its own init (the PID 1 case), labelled apart, and a source
// its controller replaces (replicaSlots): rep-a made at the start, rep-b
// an engine standing by for the pod that replaces it.
var pods = []struct {
	name, role       string
	alone, byReplica bool
}{
	{"src-a", "prefill", false, false}, {"src-b", "prefill", false, false}, {"dec", "decode", false, false},
	{"pid1", "pid1", true, false}, {"rep-a", "replica", false, true}, {"rep-b", "replica", false, true},
}

// restartArgs are what pod's engine is started again with: src-a (the
// run's source-0, which the seed's kill restarts) loads its model for a
// real restart's length, as a launched sim restarted by the kill case does
// (runner's restartArgs): the seed's kill verdict needs the window after
// detection that the restart leaves. The others come back at once, so the
// tests that restart src-b again and again stay short.
func restartArgs(pod string) string {
	if pod != "src-a" {
		return ""
	}
	return "--sim-startup-delay=" + runner.DefaultRestartLength.String()
}

func startEngines(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	plane.ns, plane.engines = "default", map[string]*podEngine{}
	for _, p := range pods {
		e := &podEngine{pod: p.name, role: p.role, http: freePort(), p2p: freePort(), done: make(chan struct{})}
		argv := []string{self, "sim", "serve", "meta-llama/Llama-3.2-1B-Instruct", "--port", strconv.Itoa(e.http), "--host", "127.0.0.1",
			"--block-size", "128", "--max-model-len", "512", "--enable-prompt-tokens-details",
			"--kv-transfer-config", kvConfig(e.p2p), "--sim-time-scale", strconv.FormatFloat(podTimeScale, 'g', -1, 64)}
		if !p.alone {
			argv = append([]string{"sh", "-c", `"$@"; while sleep 0.1; do "$@" ` + restartArgs(p.name) + `; done`, "sh"}, argv...)
		}
		logf, err := os.Create(filepath.Join(dir, p.name+".log"))
		if err != nil {
			return err
		}
		e.cmd = exec.Command(argv[0], argv[1:]...)
		e.cmd.Env = append(os.Environ(), sim.StandaloneEnv+"=1", "PYTHONHASHSEED=42", "GORACE=atexit_sleep_ms=0")
		e.cmd.Stdout, e.cmd.Stderr = logf, logf
		e.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		if err := e.cmd.Start(); err != nil {
			return err
		}
		e.init = e.cmd.Process.Pid
		go func() { _ = e.cmd.Wait(); logf.Close(); close(e.done) }()
		plane.engines[p.name] = e
	}
	for _, e := range plane.engines {
		if err := waitHealthy(e.url(), 60*time.Second); err != nil {
			return fmt.Errorf("engine of pod %s: %w", e.pod, err)
		}
	}
	return nil
}

func waitHealthy(url string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %v: %v", url, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kvConfig is the engine's --kv-transfer-config with its P2P port.
func kvConfig(port int) string {
	b, _ := json.Marshal(map[string]any{
		"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
		"kv_connector_extra_config": map[string]any{
			"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 209715200,
			"secondary_tiers": []map[string]any{{"type": "p2p", "host": "127.0.0.1", "port": port}},
		},
	})
	return string(b)
}

// makePods creates one pod per engine on the kwok node (rep-b's comes
// when the controller replaces rep-a), hostNetwork, its ports named, one
// second apart so their order (byOrder) is the list's, and waits until
// kwok has them Running with an IP.
func makePods(cs kubernetes.Interface) error {
	made := []string{}
	for _, p := range pods {
		if p.name == "rep-b" {
			continue
		}
		if len(made) > 0 && !p.byReplica {
			time.Sleep(1100 * time.Millisecond) // creation times have seconds
		}
		if err := createPod(cs, p.name, p.role, p.byReplica); err != nil {
			return err
		}
		made = append(made, p.name)
	}
	for _, name := range made {
		if err := waitRunning(cs, name, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// replicaSet is the controller the replaced pods name as their owner (no
// such object exists: the test's replicaSlots acts for it).
const replicaSetUID = "5b0e4a64-0000-4000-8000-000000000001"

// createPod creates pod name for its engine, with a controller when
// byReplica.
func createPod(cs kubernetes.Interface, name, role string, byReplica bool) error {
	e := plane.engines[name]
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plane.ns, Labels: map[string]string{"app": "vllm", "llm-d.ai/role": role}},
		Spec: corev1.PodSpec{NodeName: "kwok-node", HostNetwork: true, Containers: []corev1.Container{{
			Name: "engine", Image: "vllm/vllm-openai",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(e.http)}, {Name: "p2p", ContainerPort: int32(e.p2p)}},
		}}},
	}
	if byReplica {
		yes := true
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rep", UID: replicaSetUID, Controller: &yes}}
	}
	if _, err := cs.CoreV1().Pods(plane.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %w", name, err)
	}
	return nil
}

func waitRunning(cs kubernetes.Interface, name string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		got, err := cs.CoreV1().Pods(plane.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s not Running with an IP after %v: %v", name, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replicaSlots is the test's controller of the replica pods: when one is
// deleted, its engine is killed (the container with its pod; its shell
// brings it up again, standing by) and the pod of the other slot is made,
// on that slot's engine: new name, new ports. It runs until ctx ends.
func replicaSlots(ctx context.Context, cs kubernetes.Interface) {
	other := map[string]string{"rep-a": "rep-b", "rep-b": "rep-a"}
	for ctx.Err() == nil {
		w, err := cs.CoreV1().Pods(plane.ns).Watch(ctx, metav1.ListOptions{LabelSelector: "llm-d.ai/role=replica"})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Deleted || other[p.Name] == "" {
				continue
			}
			plane.engines[p.Name].killBelowInit()
			if err := createPod(cs, other[p.Name], "replica", true); err != nil {
				fmt.Fprintf(os.Stderr, "kube tests: the replica controller: %v\n", err)
			}
		}
		w.Stop()
	}
}

// grantAllBut binds user to a Role of every Need but those of subresource
// skip, removed at the test's end.
func grantAllBut(t *testing.T, user, skip string) {
	t.Helper()
	cs, err := (Config{Kubeconfig: plane.kubeconfig}).clientset()
	if err != nil {
		t.Fatal(err)
	}
	var rules []rbacv1.PolicyRule
	for _, n := range Needs {
		if n.Subresource == skip {
			continue
		}
		r := n.Resource
		if n.Subresource != "" {
			r += "/" + n.Subresource
		}
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{n.Group}, Resources: []string{r}, Verbs: []string{n.Verb}})
	}
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "p2pfault-" + user, Namespace: plane.ns}, Rules: rules}
	if _, err := cs.RbacV1().Roles(plane.ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: plane.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user}}}
	if _, err := cs.RbacV1().RoleBindings(plane.ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().RoleBindings(plane.ns).Delete(ctx, rb.Name, metav1.DeleteOptions{})
		_ = cs.RbacV1().Roles(plane.ns).Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
}
