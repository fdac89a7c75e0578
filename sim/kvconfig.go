package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"p2pfault/sim/engine"
)

// kvTransfer is what the sim takes from vLLM's --kv-transfer-config.
type kvTransfer struct {
	CPUBytes    int64
	P2P         bool
	P2PHost     string
	P2PPort     int
	LoadFailure engine.LoadFailurePolicy
	// UnboundStoreTimeout is the p2p tier's unbound_store_timeout_s (#53453):
	// how long a PD prefill's parked blocks wait for their fetch.
	UnboundStoreTimeout time.Duration
}

// vLLM's defaults for a p2p tier entry without host or port, when
// VLLM_P2P_SIDE_CHANNEL_HOST / _PORT are not set either (reference §1, §11).
const (
	defaultP2PHost = "localhost"
	defaultP2PPort = 5710
)

// p2pDefaults is the bind address a p2p tier entry without host or port
// takes: VLLM_P2P_SIDE_CHANNEL_HOST and VLLM_P2P_SIDE_CHANNEL_PORT, else
// vLLM's defaults (PR #47636; explicit keys win).
type p2pDefaults struct {
	Host string
	Port int
}

// sideChannelDefaults reads VLLM_P2P_SIDE_CHANNEL_HOST and _PORT.
func sideChannelDefaults(getenv func(string) string) (p2pDefaults, error) {
	d := p2pDefaults{Host: defaultP2PHost, Port: defaultP2PPort}
	if h := getenv("VLLM_P2P_SIDE_CHANNEL_HOST"); h != "" {
		d.Host = h
	}
	if v := getenv("VLLM_P2P_SIDE_CHANNEL_PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p > 65535 {
			return d, fmt.Errorf("VLLM_P2P_SIDE_CHANNEL_PORT=%q: must be an integer in 0..65535", v)
		}
		d.Port = p
	}
	return d, nil
}

// parseKVTransferConfig reads the OffloadingConnector + TieringOffloadingSpec
// config of reference §1; a p2p tier without host or port takes def's.
// Errors name the key at fault.
func parseKVTransferConfig(s string, def p2pDefaults) (kvTransfer, error) {
	out := kvTransfer{UnboundStoreTimeout: engine.DefaultUnboundStoreTimeout}
	top, err := decodeObject(s)
	if err != nil {
		return out, fmt.Errorf("--kv-transfer-config: invalid JSON: %w", err)
	}
	connector, err := reqString(top, "kv_connector", "")
	if err != nil {
		return out, err
	}
	if connector != "OffloadingConnector" {
		return out, fmt.Errorf("--kv-transfer-config: kv_connector %q is not supported (want \"OffloadingConnector\")", connector)
	}
	role, err := reqString(top, "kv_role", "")
	if err != nil {
		return out, err
	}
	switch role {
	case "kv_both", "kv_producer", "kv_consumer":
	default:
		return out, fmt.Errorf("--kv-transfer-config: kv_role %q is not one of kv_both, kv_producer, kv_consumer", role)
	}
	extraRaw, ok := top["kv_connector_extra_config"]
	if !ok {
		return out, fmt.Errorf("--kv-transfer-config: missing key %q", "kv_connector_extra_config")
	}
	extra, ok := extraRaw.(map[string]any)
	if !ok {
		return out, fmt.Errorf("--kv-transfer-config: kv_connector_extra_config must be an object")
	}
	spec, err := reqString(extra, "spec_name", "kv_connector_extra_config.")
	if err != nil {
		return out, err
	}
	if spec != "TieringOffloadingSpec" {
		return out, fmt.Errorf("--kv-transfer-config: kv_connector_extra_config.spec_name %q is not supported (want \"TieringOffloadingSpec\")", spec)
	}
	cpuRaw, ok := extra["cpu_bytes_to_use"]
	if !ok {
		return out, fmt.Errorf("--kv-transfer-config: missing key %q", "kv_connector_extra_config.cpu_bytes_to_use")
	}
	cpu, ok := jsonInt(cpuRaw)
	if !ok || cpu <= 0 {
		return out, fmt.Errorf("--kv-transfer-config: kv_connector_extra_config.cpu_bytes_to_use must be a positive integer, got %s", show(cpuRaw))
	}
	out.CPUBytes = cpu
	if err := parseTiers(extra, def, &out); err != nil {
		return out, err
	}
	// vLLM reads the policy from the top level; accept it in the extra
	// config too, where some launch scripts put it.
	for _, where := range []struct {
		m      map[string]any
		prefix string
	}{{top, ""}, {extra, "kv_connector_extra_config."}} {
		raw, ok := where.m["kv_load_failure_policy"]
		if !ok {
			continue
		}
		switch raw {
		case "fail":
			out.LoadFailure = engine.PolicyFail
		case "recompute":
			out.LoadFailure = engine.PolicyRecompute
		default:
			return out, fmt.Errorf("--kv-transfer-config: %skv_load_failure_policy %s is not \"fail\" or \"recompute\"", where.prefix, show(raw))
		}
	}
	return out, nil
}

func parseTiers(extra map[string]any, def p2pDefaults, out *kvTransfer) error {
	raw, ok := extra["secondary_tiers"]
	if !ok || raw == nil {
		return nil // no secondary tier: CPU offload only, no P2P
	}
	tiers, ok := raw.([]any)
	if !ok {
		return fmt.Errorf("--kv-transfer-config: kv_connector_extra_config.secondary_tiers must be an array")
	}
	for i, tr := range tiers {
		key := fmt.Sprintf("kv_connector_extra_config.secondary_tiers[%d]", i)
		tier, ok := tr.(map[string]any)
		if !ok {
			return fmt.Errorf("--kv-transfer-config: %s must be an object", key)
		}
		typ, err := reqString(tier, "type", key+".")
		if err != nil {
			return err
		}
		if typ != "p2p" {
			return fmt.Errorf("--kv-transfer-config: %s.type %q is not supported (want \"p2p\")", key, typ)
		}
		if out.P2P {
			return fmt.Errorf("--kv-transfer-config: %s: only one p2p tier is supported", key)
		}
		out.P2P, out.P2PHost, out.P2PPort = true, def.Host, def.Port
		if h, ok := tier["host"]; ok {
			hs, ok := h.(string)
			if !ok || hs == "" {
				return fmt.Errorf("--kv-transfer-config: %s.host must be a non-empty string, got %s", key, show(h))
			}
			out.P2PHost = hs
		}
		if p, ok := tier["port"]; ok {
			// Port 0 (a free port, logged at startup) is a sim extension.
			port, ok := jsonInt(p)
			if !ok || port < 0 || port > 65535 {
				return fmt.Errorf("--kv-transfer-config: %s.port must be an integer in 0..65535, got %s", key, show(p))
			}
			out.P2PPort = int(port)
		}
		if v, ok := tier["unbound_store_timeout_s"]; ok {
			n, isNum := v.(json.Number)
			f, err := n.Float64()
			if !isNum || err != nil || !(f > 0) || math.IsInf(f, 0) {
				return fmt.Errorf("--kv-transfer-config: %s.unbound_store_timeout_s must be a positive number of seconds, got %s", key, show(v))
			}
			out.UnboundStoreTimeout = time.Duration(f * float64(time.Second))
		}
	}
	return nil
}

func decodeObject(s string) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want an object, got %s", show(v))
	}
	return m, nil
}

func reqString(m map[string]any, key, prefix string) (string, error) {
	raw, ok := m[key]
	if !ok {
		return "", fmt.Errorf("--kv-transfer-config: missing key %q", prefix+key)
	}
	s, ok := raw.(string)
	if !ok {
		return "", fmt.Errorf("--kv-transfer-config: %s%s must be a string, got %s", prefix, key, show(raw))
	}
	return s, nil
}

// jsonInt accepts a JSON number that is an integer (209715200, not 2.5).
func jsonInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return i, true
	}
	// 2e8 is an integer written as a float.
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	const max = 60
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
