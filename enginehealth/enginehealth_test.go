package enginehealth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAskIsNilOn200AndNamesAnyOtherStatus(t *testing.T) {
	code := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	if err := Ask(context.Background(), srv.Client(), srv.URL); err != nil {
		t.Fatalf("200: %v, want nil", err)
	}
	code = http.StatusServiceUnavailable
	err := Ask(context.Background(), srv.Client(), srv.URL)
	if err == nil || !strings.Contains(err.Error(), "/health answered 503 Service Unavailable") {
		t.Fatalf("503: %v, want it named", err)
	}
}
