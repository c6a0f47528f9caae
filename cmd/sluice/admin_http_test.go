package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/configs"
)

func TestAdminGuard(t *testing.T) {
	ok := func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "done") }
	tests := []struct {
		name   string
		guard  adminGuard
		header string
		want   int
	}{
		{name: "loopback without token", guard: adminGuard{loopback: true}, want: http.StatusOK},
		{name: "non-loopback without token is refused", guard: adminGuard{}, want: http.StatusForbidden},
		{name: "token missing", guard: adminGuard{token: "s3cret"}, want: http.StatusUnauthorized},
		{name: "token wrong", guard: adminGuard{token: "s3cret", loopback: true}, header: "Bearer nope", want: http.StatusUnauthorized},
		{name: "token not bearer", guard: adminGuard{token: "s3cret"}, header: "Basic s3cret", want: http.StatusUnauthorized},
		{name: "token right", guard: adminGuard{token: "s3cret"}, header: "Bearer s3cret", want: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/meta/voters", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			w := httptest.NewRecorder()
			tt.guard.wrap(ok)(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d (%s)", w.Code, tt.want, w.Body.String())
			}
		})
	}
}

func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "token")
	if err := os.WriteFile(f, []byte("  from-file \nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := configs.Default()
	cfg.AdminHTTPTokenFile = f
	if tok, err := adminToken(cfg); err != nil || tok != "from-file" {
		t.Fatalf("token %q, %v", tok, err)
	}
	cfg.AdminHTTPToken = "inline"
	if _, err := adminToken(cfg); err == nil {
		t.Fatal("both a token and a token file were accepted")
	}
	cfg.AdminHTTPTokenFile = filepath.Join(dir, "missing")
	cfg.AdminHTTPToken = ""
	if _, err := adminToken(cfg); err == nil {
		t.Fatal("a missing token file was accepted")
	}
}

// TestAdminServesNoPprof: pprof is only on pprof.listen, and the mutating
// endpoints of a token-protected admin port refuse an anonymous caller.
func TestAdminServesNoPprof(t *testing.T) {
	var ready atomic.Bool
	a, err := startAdmin("127.0.0.1:0", adminGuard{token: "s3cret"}, prometheus.NewRegistry(), &ready, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	get := func(method, url string) int {
		req, _ := http.NewRequest(method, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(http.MethodGet, "http://"+a.Addr()+"/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("pprof on the admin port: %d", code)
	}
	if code := get(http.MethodPost, "http://"+a.Addr()+"/meta/voters"); code != http.StatusUnauthorized {
		t.Fatalf("POST /meta/voters without a token: %d", code)
	}
	addr, stop, err := startPprof("127.0.0.1:0", adminGuard{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if code := get(http.MethodGet, "http://"+addr+"/debug/pprof/"); code != http.StatusOK {
		t.Fatalf("pprof on pprof.listen: %d", code)
	}
}
