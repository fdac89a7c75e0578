package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"p2pfault/exitcode"
)

func tierConfig(tierExtra string) string {
	return `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":209715200,"secondary_tiers":[{"type":"p2p","host":"127.0.0.1","port":7777` + tierExtra + `}]}}`
}

func TestPDTimeoutsAreConfiguredLikeVLLM(t *testing.T) {
	env := map[string]string{"PYTHONHASHSEED": "42"}
	tests := []struct {
		name                 string
		args                 []string
		wantUnbound, wantSto time.Duration
	}{
		{"vLLM's defaults: unbound stores wait 60 s, store jobs 30 s", []string{"--kv-transfer-config", tierConfig("")}, 60 * time.Second, 30 * time.Second},
		{"unbound_store_timeout_s is read from the p2p tier entry", []string{"--kv-transfer-config", tierConfig(`,"unbound_store_timeout_s":180`)}, 180 * time.Second, 30 * time.Second},
		{"fractional seconds are kept", []string{"--kv-transfer-config", tierConfig(`,"unbound_store_timeout_s":2.5`)}, 2500 * time.Millisecond, 30 * time.Second},
		{"--sim-time-scale scales both, as every sim timeout", []string{"--sim-time-scale", "0.1", "--sim-store-timeout", "20s", "--kv-transfer-config", tierConfig(`,"unbound_store_timeout_s":90`)}, 9 * time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := resolveArgs(t, env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if c.Engine.UnboundStoreTimeout != tt.wantUnbound || c.Engine.StoreTimeout != tt.wantSto {
				t.Errorf("unbound %v, store %v; want %v, %v", c.Engine.UnboundStoreTimeout, c.Engine.StoreTimeout, tt.wantUnbound, tt.wantSto)
			}
		})
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--kv-transfer-config", tierConfig(`,"unbound_store_timeout_s":0`)}, "secondary_tiers[0].unbound_store_timeout_s must be a positive number of seconds, got 0"},
		{[]string{"--kv-transfer-config", tierConfig(`,"unbound_store_timeout_s":-5`)}, "unbound_store_timeout_s must be a positive number"},
		{[]string{"--kv-transfer-config", tierConfig(`,"unbound_store_timeout_s":"60"`)}, `got "60"`},
		{[]string{"--sim-store-timeout", "0s"}, "--sim-store-timeout 0s: must be a positive duration"},
	} {
		t.Run(fmt.Sprint("refused: ", bad.args), func(t *testing.T) {
			_, err := resolveArgs(t, env, bad.args...)
			var ee *exitcode.Error
			if err == nil || !errors.As(err, &ee) || ee.Code != exitcode.Usage || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("err %v, want a usage error containing %q", err, bad.want)
			}
		})
	}
}

func TestPDRoleKeys(t *testing.T) {
	const peer = `{"kv_request_id":"k","remote_host":"127.0.0.1","remote_port":7777}`
	t.Run("remote_prefiller is a PD decode leg naming its prefiller literally", func(t *testing.T) {
		r, apiErr := decodeCompletionRequest([]byte(`{"prompt":"a","kv_transfer_params":{"remote_prefiller":`+peer+`}}`), "m", 512)
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		if r.Source == nil || !r.Source.Prefiller || r.Source.ID() != "127.0.0.1:7777" || r.Source.KVRequestID != "k" || r.RemoteDecoder != "" {
			t.Errorf("decoded %+v (source %+v)", r, r.Source)
		}
	})
	t.Run("remote_decoder is a PD prefill leg parking for its id", func(t *testing.T) {
		r, apiErr := decodeCompletionRequest([]byte(`{"prompt":"a","kv_transfer_params":{"remote_decoder":{"kv_request_id":"pd-7"}}}`), "m", 512)
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		if r.Source != nil || r.RemoteDecoder != "pd-7" {
			t.Errorf("decoded %+v", r)
		}
	})
	t.Run("remote_decoder with remote_kv_source is the one legal pair", func(t *testing.T) {
		r, apiErr := decodeCompletionRequest([]byte(`{"prompt":"a","kv_transfer_params":{"remote_decoder":{"kv_request_id":"pd-8"},"remote_kv_source":`+peer+`}}`), "m", 512)
		if apiErr != nil {
			t.Fatal(apiErr)
		}
		if r.Source == nil || r.Source.Prefiller || r.RemoteDecoder != "pd-8" {
			t.Errorf("decoded %+v", r)
		}
	})
	for _, bad := range []struct{ name, params, want string }{
		{"remote_prefiller with remote_kv_source", `{"remote_prefiller":` + peer + `,"remote_kv_source":` + peer + `}`, "two competing fetch sources"},
		{"remote_prefiller with remote_decoder", `{"remote_prefiller":` + peer + `,"remote_decoder":{"kv_request_id":"k"}}`, "contradictory roles"},
		{"remote_prefiller without remote_port", `{"remote_prefiller":{"kv_request_id":"k","remote_host":"h"}}`, "remote_prefiller.remote_port is required"},
		{"remote_decoder without its id", `{"remote_decoder":{}}`, "remote_decoder.kv_request_id is required"},
		{"remote_decoder with an empty id", `{"remote_decoder":{"kv_request_id":""}}`, "remote_decoder.kv_request_id must be a non-empty string"},
		{"a key vLLM no longer reads", `{"prefill":{}}`, `unknown key "prefill" (want remote_kv_source, remote_prefiller or remote_decoder)`},
	} {
		t.Run("refused: "+bad.name, func(t *testing.T) {
			_, apiErr := decodeCompletionRequest([]byte(`{"prompt":"a","kv_transfer_params":`+bad.params+`}`), "m", 512)
			if apiErr == nil || apiErr.Status != 400 || apiErr.Param != "kv_transfer_params" || !strings.Contains(apiErr.Message, bad.want) {
				t.Errorf("got %+v, want a 400 on kv_transfer_params containing %q", apiErr, bad.want)
			}
		})
	}
}
