package doctor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"p2pfault/runner"
)

// fakeNvidiaSMI puts a stand-in nvidia-smi listing n GPUs on PATH.
func fakeNvidiaSMI(t *testing.T, n int) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "echo 'GPU %d: NVIDIA A100-SXM4-80GB (UUID: GPU-5a2b9c1e-0000-4000-8000-00000000000%d)'\n", i, i)
	}
	script(t, dir, "nvidia-smi", `[ "$1" = "-L" ] || exit 2
`+b.String())
	t.Setenv("PATH", dir)
}

// noCUDAEnv is the real host without a CUDA_VISIBLE_DEVICES of its own.
func noCUDAEnv() Host {
	h := System()
	h.LookupEnv = func(string) (string, bool) { return "", false }
	return h
}

func TestGPUsPassWhenEachGPUHoldsWhatFits(t *testing.T) {
	fakeNvidiaSMI(t, 4)
	c := vllmCluster(t, "main", runner.Config{GPUs: []string{"0", "GPU-5a2b9c1e-0000-4000-8000-000000000001"}})
	rs := GPUs(context.Background(), noCUDAEnv(), Plan{Clusters: []Cluster{c}, AtOnce: 1})
	if len(rs) != 2 || Failed(rs) != 0 {
		t.Fatalf("want 2 passing lines:\n%s", lines(rs))
	}
	if want := "nvidia-smi -L lists 4 GPUs: 0, 1, 2, 3 NVIDIA A100-SXM4-80GB"; rs[0].Found != want {
		t.Errorf("found %q, want %q", rs[0].Found, want)
	}
	// Round-robin: source-0 and the decoder on GPU 0, source-1 on the one
	// its UUID names.
	if want := "3 engines on 2 GPUs at --gpu-memory-utilization 0.45 (2 fit per GPU): GPU 0: source-0, decoder (0.90); GPU 1: source-1 (0.45)"; rs[1].Found != want {
		t.Errorf("found %q\nwant  %q", rs[1].Found, want)
	}
}

func TestGPUsFailOnAGPUNvidiaSMIDoesNotList(t *testing.T) {
	fakeNvidiaSMI(t, 2)
	c := vllmCluster(t, "main", runner.Config{GPUs: []string{"0", "1", "7"}})
	rs := GPUs(context.Background(), noCUDAEnv(), Plan{Clusters: []Cluster{c}, AtOnce: 1})
	if len(rs) != 2 || !rs[0].OK || rs[1].OK {
		t.Fatalf("want the list, then a failure:\n%s", lines(rs))
	}
	if want := "GPU 7 (from --gpus) is not among the GPUs nvidia-smi -L lists (0, 1)"; rs[1].Found != want {
		t.Errorf("found %q, want %q", rs[1].Found, want)
	}
}

func TestGPUsFailWhenEveryEngineLandsOnTheFirstGPU(t *testing.T) {
	fakeNvidiaSMI(t, 4)
	rs := GPUs(context.Background(), noCUDAEnv(), Plan{Clusters: []Cluster{vllmCluster(t, "main", runner.Config{})}, AtOnce: 1})
	mem := only(rs, "GPU memory")
	if len(mem) != 1 || mem[0].OK {
		t.Fatalf("want a failed memory line:\n%s", lines(rs))
	}
	if !strings.Contains(mem[0].Found, "GPU 0 would hold source-0, source-1, decoder at --gpu-memory-utilization 0.45: 1.35 of its memory") {
		t.Errorf("found %q", mem[0].Found)
	}
	if want := "give --gpus (e.g. --gpus 0,1): without it every engine runs on the first GPU"; mem[0].Fix != want {
		t.Errorf("fix %q, want %q", mem[0].Fix, want)
	}
}

func TestGPUsFollowTheInheritedCUDAVisibleDevices(t *testing.T) {
	fakeNvidiaSMI(t, 4)
	h := System()
	h.LookupEnv = func(k string) (string, bool) { return "3,2", k == "CUDA_VISIBLE_DEVICES" }
	rs := only(GPUs(context.Background(), h, Plan{Clusters: []Cluster{vllmCluster(t, "main", runner.Config{Sources: 1})}, AtOnce: 1}), "GPU memory")
	if len(rs) != 1 || !rs[0].OK || !strings.HasSuffix(rs[0].Found, "GPU 3: source-0, decoder (0.90)") {
		t.Errorf("want both engines on GPU 3, the first of CUDA_VISIBLE_DEVICES: %v", rs)
	}
}

func TestGPUsCountTheClustersThatRunAtOnce(t *testing.T) {
	fakeNvidiaSMI(t, 2)
	// Two slice rows of one vllm arm, each on --gpus 0,1: one at a time
	// they fit, both at once GPU 0 holds four engines.
	row := vllmCluster(t, "main/stall", runner.Config{GPUs: []string{"0", "1"}})
	rows := []Cluster{row, row}
	if rs := only(GPUs(context.Background(), noCUDAEnv(), Plan{Clusters: rows, AtOnce: 1}), "GPU memory"); len(rs) != 1 || !rs[0].OK {
		t.Errorf("one row at a time: %v", rs)
	}
	rs := only(GPUs(context.Background(), noCUDAEnv(), Plan{Clusters: rows, AtOnce: 2}), "GPU memory")
	if len(rs) != 1 || rs[0].OK || !strings.Contains(rs[0].Found, "GPU 0 would hold main/stall/source-0, main/stall/decoder, main/stall/source-0, main/stall/decoder") {
		t.Errorf("two rows at once: %v", rs)
	}
	if want := "6 engines at 2 per GPU need 3 GPUs and nvidia-smi lists 2"; len(rs) == 1 && !strings.HasPrefix(rs[0].Fix, want) {
		t.Errorf("fix %q, want it to start %q", rs[0].Fix, want)
	}
}

func TestGPUsFailWithoutNvidiaSMI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	rs := GPUs(context.Background(), noCUDAEnv(), Plan{Clusters: []Cluster{vllmCluster(t, "main", runner.Config{})}, AtOnce: 1})
	if len(rs) != 1 || rs[0].OK || !strings.HasPrefix(rs[0].Found, "nvidia-smi: ") || !strings.Contains(rs[0].Fix, "--engine sim") {
		t.Errorf("want one failed line naming nvidia-smi:\n%s", lines(rs))
	}
}

func TestGPUsAreNotCheckedForTheSimulatedEngine(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no nvidia-smi, and none needed
	specs, err := runner.Plan(runner.Config{SelfBin: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if rs := GPUs(context.Background(), noCUDAEnv(), Plan{Clusters: []Cluster{{Label: "main", Specs: specs}}, AtOnce: 1}); len(rs) != 0 {
		t.Errorf("sim: want no GPU line:\n%s", lines(rs))
	}
}

func TestMemoryUtilizationIsTheLastGiven(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want float64
	}{
		{[]string{"serve", "m"}, DefaultGPUMemoryUtilization},
		{[]string{"serve", "m", "--gpu-memory-utilization", "0.45"}, 0.45},
		{[]string{"serve", "m", "--gpu-memory-utilization", "0.45", "--gpu_memory_utilization=0.3"}, 0.3},
	} {
		if got := memoryUtilization(tc.args); got != tc.want {
			t.Errorf("%q: %g, want %g", tc.args, got, tc.want)
		}
	}
}
