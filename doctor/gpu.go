package doctor

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"p2pfault/runner"
)

// gpu is one line of `nvidia-smi -L`.
type gpu struct {
	index string // "0"
	name  string // "NVIDIA A100-SXM4-80GB"
	uuid  string // "GPU-5a2b..."
}

var (
	gpuLine = regexp.MustCompile(`^GPU (\d+): (.*?) \(UUID: (\S+)\)`)
	migLine = regexp.MustCompile(`^\s+MIG .*\(UUID: (MIG-\S+)\)`)
)

// parseGPUs reads `nvidia-smi -L`; a MIG instance counts as a device of
// its own (CUDA_VISIBLE_DEVICES may name it by its UUID).
func parseGPUs(out []byte) []gpu {
	var gs []gpu
	for _, line := range strings.Split(string(out), "\n") {
		if m := gpuLine.FindStringSubmatch(line); m != nil {
			gs = append(gs, gpu{index: m[1], name: m[2], uuid: m[3]})
		} else if m := migLine.FindStringSubmatch(line); m != nil && len(gs) > 0 {
			gs = append(gs, gpu{index: gs[len(gs)-1].index, name: "MIG instance of GPU " + gs[len(gs)-1].index, uuid: m[1]})
		}
	}
	return gs
}

// lookup finds the device a CUDA_VISIBLE_DEVICES entry names: an index,
// or a UUID (CUDA takes a unique prefix of one).
func lookup(gs []gpu, id string) (gpu, bool) {
	var found []gpu
	for _, g := range gs {
		switch {
		case strings.HasPrefix(id, "GPU-") || strings.HasPrefix(id, "MIG-"):
			if strings.HasPrefix(g.uuid, id) {
				found = append(found, g)
			}
		case g.index == id && !strings.HasPrefix(g.uuid, "MIG-"):
			found = append(found, g)
		}
	}
	if len(found) != 1 {
		return gpu{}, false
	}
	return found[0], true
}

// DefaultGPUMemoryUtilization is vLLM's --gpu-memory-utilization when a
// command line gives none (the runner always gives 0.45).
const DefaultGPUMemoryUtilization = 0.9

// placed is one engine on one device.
type placed struct {
	engine string // "main/source-0"
	id     string // what CUDA_VISIBLE_DEVICES names ("" = the first GPU)
	from   string // where the id came from, for messages
	util   float64
}

// placement says which device each engine at the peak runs on: the
// CUDA_VISIBLE_DEVICES its spec sets (--gpus, round-robin), else the
// one it inherits from p2pfault's environment (its first entry: vLLM with
// tensor-parallel size 1 uses its first visible device), else the first GPU.
func placement(h Host, peak []Cluster) []placed {
	inherited, hasInherited := h.LookupEnv("CUDA_VISIBLE_DEVICES")
	var ps []placed
	for _, c := range peak {
		if c.Config.Engine != runner.EngineVLLM {
			continue
		}
		for _, s := range c.Specs {
			p := placed{engine: s.Name, util: memoryUtilization(s.Args)}
			if len(peak) > 1 {
				p.engine = c.Label + "/" + s.Name
			}
			if v, ok := envValue(s.Env, "CUDA_VISIBLE_DEVICES"); ok {
				p.id, p.from = v, "--gpus"
			} else if hasInherited {
				p.id, _, _ = strings.Cut(inherited, ",")
				p.id, p.from = strings.TrimSpace(p.id), "CUDA_VISIBLE_DEVICES="+inherited+" in p2pfault's environment"
			}
			ps = append(ps, p)
		}
	}
	return ps
}

// memoryUtilization is the last --gpu-memory-utilization of a command
// line (argparse keeps the last one), or vLLM's default.
func memoryUtilization(args []string) float64 {
	u := DefaultGPUMemoryUtilization
	for i, a := range args {
		name, val, hasVal := strings.Cut(a, "=")
		if optionName(name, true) != "--gpu-memory-utilization" {
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				continue
			}
			val = args[i+1]
		}
		if f, err := strconv.ParseFloat(val, 64); err == nil && f > 0 {
			u = f
		}
	}
	return u
}

// GPUs checks, for a run of real vLLM engines, that nvidia-smi sees GPUs,
// that every device the engines are given is one of them, and that the
// engines sharing a device at the peak fit in its memory: vLLM refuses to
// start an engine while the device's free memory is below
// --gpu-memory-utilization × its total (two fit at the launch script's
// 0.45, reference §1).
func GPUs(ctx context.Context, h Host, p Plan) []Result {
	peak := p.Clusters
	if p.AtOnce > 0 && p.AtOnce < len(peak) {
		peak = peak[:p.AtOnce]
	}
	ps := placement(h, peak)
	if len(ps) == 0 {
		return nil
	}
	r := Result{Check: "GPUs"}
	path, err := h.LookPath("nvidia-smi")
	if err != nil {
		r.Found = fmt.Sprintf("nvidia-smi: %v", err)
		r.Fix = "run on a host with NVIDIA GPUs and their driver (nvidia-smi comes with it), or use --engine sim"
		return []Result{r}
	}
	out, err := h.Exec(ctx, path, "-L")
	if err != nil {
		r.Found = fmt.Sprintf("%s -L failed (%v): %s", path, err, lastLine(out))
		r.Fix = "repair the NVIDIA driver (nvidia-smi must list the GPUs)"
		return []Result{r}
	}
	gs := parseGPUs(out)
	if len(gs) == 0 {
		r.Found = fmt.Sprintf("%s -L lists no GPU", path)
		r.Fix = "run on a host with NVIDIA GPUs, or use --engine sim"
		return []Result{r}
	}
	r.OK, r.Found = true, fmt.Sprintf("nvidia-smi -L lists %s", describe(gs))
	rs := []Result{r}

	// Every device an engine is given must exist.
	var unknown []string
	for _, pl := range ps {
		if pl.id == "" {
			continue
		}
		if _, ok := lookup(gs, pl.id); !ok && !slices.Contains(unknown, pl.id) {
			unknown = append(unknown, pl.id)
		}
	}
	if len(unknown) > 0 {
		from := map[string]bool{}
		for _, pl := range ps {
			if slices.Contains(unknown, pl.id) {
				from[pl.from] = true
			}
		}
		var froms []string
		for f := range from {
			froms = append(froms, f)
		}
		slices.Sort(froms)
		return append(rs, Result{
			Check: "GPUs given",
			Found: fmt.Sprintf("%s %s (from %s) %s among the GPUs nvidia-smi -L lists (%s)",
				map[bool]string{true: "GPU", false: "GPUs"}[len(unknown) == 1], strings.Join(unknown, ", "), strings.Join(froms, ", "),
				map[bool]string{true: "is not", false: "are not"}[len(unknown) == 1], indices(gs)),
			Fix: "give --gpus indices or UUIDs that nvidia-smi -L lists",
		})
	}
	return append(rs, gpuMemory(ps, gs))
}

// describe is "4 GPUs: 0, 1, 2, 3 NVIDIA A100-SXM4-80GB", a model once
// for its run of indices.
func describe(gs []gpu) string {
	var parts []string
	n := 0
	for i := 0; i < len(gs); {
		if strings.HasPrefix(gs[i].uuid, "MIG-") {
			i++
			continue
		}
		j, ids := i, []string{}
		for ; j < len(gs) && (gs[j].name == gs[i].name || strings.HasPrefix(gs[j].uuid, "MIG-")); j++ {
			if !strings.HasPrefix(gs[j].uuid, "MIG-") {
				ids = append(ids, gs[j].index)
			}
		}
		n += len(ids)
		parts = append(parts, strings.Join(ids, ", ")+" "+gs[i].name)
		i = j
	}
	return plural(n, "GPU") + ": " + strings.Join(parts, "; ")
}

func indices(gs []gpu) string {
	var ids []string
	for _, g := range gs {
		if !strings.HasPrefix(g.uuid, "MIG-") {
			ids = append(ids, g.index)
		}
	}
	return strings.Join(ids, ", ")
}

// gpuMemory adds up the memory share of the engines on each device.
func gpuMemory(ps []placed, gs []gpu) Result {
	type device struct {
		label   string
		engines []string
		share   float64
		maxUtil float64
	}
	var order []string
	devs := map[string]*device{}
	for _, pl := range ps {
		key, label := gs[0].uuid, "GPU "+gs[0].index
		if pl.id != "" {
			g, _ := lookup(gs, pl.id)
			key, label = g.uuid, "GPU "+g.index
			if strings.HasPrefix(g.uuid, "MIG-") {
				label = g.uuid
			}
		}
		d, ok := devs[key]
		if !ok {
			d = &device{label: label}
			devs[key] = d
			order = append(order, key)
		}
		d.engines = append(d.engines, pl.engine)
		d.share += pl.util
		d.maxUtil = math.Max(d.maxUtil, pl.util)
	}
	r := Result{Check: "GPU memory"}
	var parts []string
	var worst *device
	for _, k := range order {
		d := devs[k]
		parts = append(parts, fmt.Sprintf("%s: %s (%.2f)", d.label, strings.Join(d.engines, ", "), d.share))
		if d.share > 1+1e-9 && (worst == nil || d.share > worst.share) {
			worst = d
		}
	}
	if worst == nil {
		top := 0.0
		for _, pl := range ps {
			top = math.Max(top, pl.util)
		}
		r.OK = true
		r.Found = fmt.Sprintf("%s on %s at --gpu-memory-utilization %g (%d fit per GPU): %s",
			plural(len(ps), "engine"), plural(len(order), "GPU"), top, perGPU(top), strings.Join(parts, "; "))
		return r
	}
	fit := perGPU(worst.maxUtil)
	r.Found = fmt.Sprintf("%s would hold %s at --gpu-memory-utilization %g: %.2f of its memory (vLLM starts an engine only while free memory covers its share; %d fit per GPU)",
		worst.label, strings.Join(worst.engines, ", "), worst.maxUtil, worst.share, fit)
	given := false
	for _, pl := range ps {
		given = given || pl.from == "--gpus"
	}
	need := (len(ps) + max(fit, 1) - 1) / max(fit, 1)
	visible := len(firstIndices(gs, len(gs)))
	switch {
	case need > visible:
		r.Fix = fmt.Sprintf("%s at %d per GPU need %d GPUs and nvidia-smi lists %d: run fewer --sources (or arms at once), or on a host with more GPUs",
			plural(len(ps), "engine"), fit, need, visible)
	case given:
		r.Fix = fmt.Sprintf("give --gpus more GPUs (e.g. --gpus %s: at most %d engines each)", strings.Join(firstIndices(gs, need), ","), fit)
	default:
		r.Fix = fmt.Sprintf("give --gpus (e.g. --gpus %s): without it every engine runs on the first GPU", strings.Join(firstIndices(gs, need), ","))
	}
	return r
}

// firstIndices lists up to n GPU indices, for an example.
func firstIndices(gs []gpu, n int) []string {
	var ids []string
	for _, g := range gs {
		if !strings.HasPrefix(g.uuid, "MIG-") && len(ids) < n {
			ids = append(ids, g.index)
		}
	}
	return ids
}

// perGPU is how many engines of memory share util fit on one GPU.
func perGPU(util float64) int { return int(math.Floor(1/util + 1e-9)) }
