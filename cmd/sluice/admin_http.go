package main

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/internal/sasl"
	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/metastore"
)

// adminGuard protects the admin port's mutating endpoints (POST and
// DELETE /meta/voters, broker decommissioning, the metastore backup): they
// change the metadata quorum or hand out its secrets, so anyone who can
// reach them can take the cluster apart. With admin.http.token (or
// admin.http.token.file) set they need "Authorization: Bearer <token>";
// without one they are served only when the admin port listens on a
// loopback address, where only this host's users reach it.
//
// With admin.http.require.auth (Redpanda's admin_api_require_auth; `sluice
// dev --secure` sets it) the loopback exemption goes: a request needs the
// bearer token, or HTTP basic credentials of a SCRAM user (checked against
// the metastore's credentials as PLAIN is) who is a super user (super.users
// or the metastore's stored super users); pprof.listen is guarded the same
// way. Read-only endpoints (/metrics, /healthz, /readyz, /meta/status)
// stay open for probes and scrapers.
type adminGuard struct {
	token       string
	loopback    bool
	requireAuth bool
	// catalog and superUsers serve basic credentials: the metastore's
	// SCRAM credentials and stored super users (nil until connected), and
	// super.users.
	catalog    func() *metastore.Client
	superUsers []string
	// tls is the admin port's own TLS (admin.http.ssl.*; nil: plain
	// HTTP). A verified client certificate whose subject names a super
	// user (User:<subject>) authenticates under requireAuth.
	tls *tls.Config
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
		if g.requireAuth {
			if code, msg := g.authenticate(r); code != 0 {
				w.Header().Set("WWW-Authenticate", `Basic realm="sluice-admin"`)
				http.Error(w, msg, code)
				return
			}
			h(w, r)
			return
		}
		if g.token == "" {
			if !g.loopback {
				http.Error(w, "refused: mutating admin endpoints need admin.http.token (or admin.http.token.file) when admin.addr is not a loopback address", http.StatusForbidden)
				return
			}
			h(w, r)
			return
		}
		if !g.bearerOK(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-admin"`)
			http.Error(w, "unauthorized: a valid bearer token is required", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

func (g adminGuard) bearerOK(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && g.token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(g.token)) == 1
}

// authenticate checks a request under admin.http.require.auth: 0 when it
// may proceed, else the HTTP status and why.
func (g adminGuard) authenticate(r *http.Request) (int, string) {
	if g.bearerOK(r) {
		return 0, ""
	}
	var cat *metastore.Client
	if g.catalog != nil {
		cat = g.catalog()
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		principal := "User:" + tlsconfig.SubjectName(r.TLS.PeerCertificates[0].RawSubject)
		if g.isSuper(cat, principal) {
			return 0, ""
		}
		if _, _, ok := r.BasicAuth(); !ok {
			return http.StatusForbidden, "forbidden: " + principal + " is not a super user"
		}
	}
	user, pass, ok := r.BasicAuth()
	if !ok {
		return http.StatusUnauthorized, "unauthorized: HTTP basic credentials of a super user (or the bearer token) are required"
	}
	if cat == nil {
		return http.StatusServiceUnavailable, "starting: not connected to the metastore yet"
	}
	sess, err := sasl.NewSession(sasl.Plain, adminCredentials{cat}, nil)
	if err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	if _, done, err := sess.Step([]byte("\x00" + user + "\x00" + pass)); err != nil || !done {
		return http.StatusUnauthorized, "unauthorized: invalid username or password"
	}
	principal := "User:" + user
	if !g.isSuper(cat, principal) {
		return http.StatusForbidden, "forbidden: " + principal + " is not a super user"
	}
	return 0, ""
}

// isSuper reports whether principal is a super user: in super.users, or
// among the metastore's stored super users (cat nil: not connected yet).
func (g adminGuard) isSuper(cat *metastore.Client, principal string) bool {
	return slices.Contains(g.superUsers, principal) || (cat != nil && slices.Contains(cat.StoredSuperUsers(), principal))
}

// adminCredentials reads SCRAM credentials from the metastore client's
// view for the basic credentials check.
type adminCredentials struct{ c *metastore.Client }

func (a adminCredentials) ScramCredential(user, mech string) (sasl.ScramCredential, bool) {
	cr, ok := a.c.ScramCredential(user, mech)
	if !ok {
		return sasl.ScramCredential{}, false
	}
	return sasl.ScramCredential{Salt: cr.Salt, StoredKey: cr.StoredKey, ServerKey: cr.ServerKey, Iterations: cr.Iterations}, true
}

// setAdminAuth adds the admin port's credentials to a request of Sluice's
// own commands: the bearer token when one is given, else
// SLUICE_ADMIN_HTTP_USER=name:password as HTTP basic credentials.
func setAdminAuth(req *http.Request, token string) {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
		return
	}
	if u, p, ok := strings.Cut(os.Getenv("SLUICE_ADMIN_HTTP_USER"), ":"); ok {
		req.SetBasicAuth(u, p)
	}
}

// startPprof serves net/http/pprof on pprof.listen, apart from the admin
// port (profiles reveal memory contents and cost CPU); nothing when it is
// empty. It returns the bound address and what stops it.
// Under admin.http.require.auth its requests pass guard first.
func startPprof(addr string, guard adminGuard, lg zerolog.Logger) (string, func() error, error) {
	if addr == "" {
		return "", func() error { return nil }, nil
	}
	mux := http.NewServeMux()
	wrap := func(h http.HandlerFunc) http.HandlerFunc {
		if guard.requireAuth {
			return guard.wrap(h)
		}
		return h
	}
	mux.HandleFunc("/debug/pprof/", wrap(pprof.Index))
	mux.HandleFunc("/debug/pprof/cmdline", wrap(pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", wrap(pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", wrap(pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", wrap(pprof.Trace))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("pprof listener: %w", err)
	}
	if guard.tls != nil {
		ln = tls.NewListener(ln, guard.tls)
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

// adminClient is how Sluice's commands reach an admin port: admin is
// host:port (plain HTTP) or https://host:port, then trusting the CA file
// SLUICE_ADMIN_HTTP_CA (else the system's roots) and presenting
// SLUICE_ADMIN_HTTP_CERT (a PEM file with key and certificate) when set.
// It returns the base URL and the client.
func adminClient(admin string, timeout time.Duration) (string, *http.Client, error) {
	cl := &http.Client{Timeout: timeout}
	if !strings.HasPrefix(admin, "https://") {
		return "http://" + strings.TrimPrefix(admin, "http://"), cl, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca := os.Getenv("SLUICE_ADMIN_HTTP_CA"); ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			return "", nil, fmt.Errorf("SLUICE_ADMIN_HTTP_CA: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return "", nil, fmt.Errorf("SLUICE_ADMIN_HTTP_CA %s holds no certificate", ca)
		}
	}
	if f := os.Getenv("SLUICE_ADMIN_HTTP_CERT"); f != "" {
		cert, err := tls.LoadX509KeyPair(f, f)
		if err != nil {
			return "", nil, fmt.Errorf("SLUICE_ADMIN_HTTP_CERT: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	cl.Transport = &http.Transport{TLSClientConfig: tc}
	return strings.TrimSuffix(admin, "/"), cl, nil
}
