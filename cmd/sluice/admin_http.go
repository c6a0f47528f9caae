package main

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/configs"
)

// adminGuard protects the admin port's mutating endpoints (POST and
// DELETE /meta/voters): they change the metadata quorum, so anyone who can
// reach them can take the cluster apart. With admin.http.token (or
// admin.http.token.file) set they need "Authorization: Bearer <token>";
// without one they are served only when the admin port listens on a
// loopback address, where only this host's users reach it. Read-only
// endpoints (/metrics, /healthz, /readyz, /meta/status) stay open for
// probes and scrapers.
type adminGuard struct {
	token    string
	loopback bool
}

// adminToken reads the configured token: admin.http.token, or the first
// line of admin.http.token.file.
func adminToken(cfg configs.Config) (string, error) {
	if cfg.AdminHTTPTokenFile == "" {
		return cfg.AdminHTTPToken, nil
	}
	if cfg.AdminHTTPToken != "" {
		return "", errors.New("admin.http.token and admin.http.token.file are both set: keep one")
	}
	b, err := os.ReadFile(cfg.AdminHTTPTokenFile)
	if err != nil {
		return "", fmt.Errorf("admin.http.token.file: %w", err)
	}
	tok := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	if tok == "" {
		return "", fmt.Errorf("admin.http.token.file %s: the first line is empty", cfg.AdminHTTPTokenFile)
	}
	return tok, nil
}

func isLoopback(addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

func (g adminGuard) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if g.token == "" {
			if !g.loopback {
				http.Error(w, "refused: mutating admin endpoints need admin.http.token (or admin.http.token.file) when admin.addr is not a loopback address", http.StatusForbidden)
				return
			}
			h(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(g.token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-admin"`)
			http.Error(w, "unauthorized: a valid bearer token is required", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

// startPprof serves net/http/pprof on pprof.listen, apart from the admin
// port (profiles reveal memory contents and cost CPU); nothing when it is
// empty. It returns the bound address and what stops it.
func startPprof(addr string, lg zerolog.Logger) (string, func() error, error) {
	if addr == "" {
		return "", func() error { return nil }, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("pprof listener: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error().Err(err).Msg("pprof http")
		}
	}()
	lg.Info().Str("addr", ln.Addr().String()).Msg("pprof serving")
	return ln.Addr().String(), srv.Close, nil
}
