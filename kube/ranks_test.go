package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"p2pfault/fault"
)

// dpPod creates a pod of role dp whose engine container is started with
// args (no engine answers for it: Plan and Open read the pod, nothing
// more), deleted at the test's end.
func dpPod(t *testing.T, name string, args ...string) {
	t.Helper()
	cs, err := testConfig("").clientset()
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: plane.ns, Labels: map[string]string{"llm-d.ai/role": "dp-" + name}},
		Spec: corev1.PodSpec{NodeName: "kwok-node", HostNetwork: true, Containers: []corev1.Container{{
			Name: "engine", Image: "vllm/vllm-openai", Command: []string{"vllm", "serve"}, Args: args,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 18000}, {Name: "p2p", ContainerPort: 17777}},
		}}},
	}
	if _, err := cs.CoreV1().Pods(plane.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.CoreV1().Pods(plane.ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	if err := waitRunning(cs, name, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// A source pod whose engine is started with --data-parallel-size N has N
// ranks, rank r's P2P port at the pod's + r: the plan says so (what a
// timeline may name), the target pins the probe's trials to each; a fault
// of one rank is refused, naming --kube; a bad size names the pod.
func TestDataParallelRanksAreReadFromTheEnginesArguments(t *testing.T) {
	needPlane(t)
	dpPod(t, "dp", "meta-llama/Llama-3.2-1B-Instruct", "--port", "18000", "--data-parallel-size", "2")
	cfg := testConfig("llm-d.ai/role=dp-dp")
	plan, err := Opener{Config: cfg}.Plan(nil)
	if err != nil || len(plan.Ranks) != 1 || plan.Ranks[0] != 2 {
		t.Fatalf("plan ranks %v, %v; want [2]", plan.Ranks, err)
	}
	tl, err := fault.Parse("at 1s stall source-0/rank1 for 1s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Opener{Config: cfg}).Plan(tl); err == nil || !strings.Contains(err.Error(), "--kube: stall of one data-parallel rank") {
		t.Errorf("a stall of one rank: %v, want refused naming --kube", err)
	}
	c := openConfig(t, cfg)
	s := c.sources[0]
	if s.Ranks() != 2 || s.P2PPort() != 17777 {
		t.Errorf("source-0: %d ranks, P2P port %d; want 2 from 17777", s.Ranks(), s.P2PPort())
	}
	if _, err := s.RankTarget(1); err == nil || !strings.Contains(err.Error(), "source-0/rank1") {
		t.Errorf("RankTarget(1): %v, want refused naming source-0/rank1", err)
	}
	if n := openTest(t, "llm-d.ai/role=prefill").sources[0].Ranks(); n != 1 {
		t.Errorf("a pod without --data-parallel-size: %d ranks, want 1", n)
	}

	dpPod(t, "dpbad", "meta-llama/Llama-3.2-1B-Instruct", "-dp=two")
	_, err = Opener{Config: testConfig("llm-d.ai/role=dp-dpbad")}.Plan(nil)
	if err == nil || !strings.Contains(err.Error(), "pod dpbad") || !strings.Contains(err.Error(), `"two"`) {
		t.Errorf("-dp=two: %v, want an error naming the pod and the value", err)
	}
}
