package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/configs"
	"github.com/sluice-broker/sluice/internal/sasl"
	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/metastore"
)

// credentialCatalog is the part of Catalog that holds SCRAM credentials
// (metastore/scram.go): read from the local view when a client
// authenticates, written by AlterUserScramCredentials.
type credentialCatalog interface {
	ScramCredential(user, mechanism string) (metastore.ScramCredential, bool)
	ScramUsers() map[string][]metastore.ScramCredential
	AlterScramCredentials(ctx context.Context, creds []metastore.ScramCredential) error
}

// listenerSecurity is a listener's security, resolved when it starts.
type listenerSecurity struct {
	cfg   configs.ListenerSecurity
	tls   *tls.Config // nil: no TLS
	mechs map[string]bool
	oauth *sasl.Validator
}

func (s *Server) newListenerSecurity(lc configs.Listener) (*listenerSecurity, error) {
	cfg, err := s.cfg.ListenerSecurity(lc)
	if err != nil {
		return nil, err
	}
	ls := &listenerSecurity{cfg: cfg, mechs: map[string]bool{}}
	if cfg.UsesTLS() {
		ld, err := tlsconfig.NewLoader(cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", lc.Name, err)
		}
		ls.tls = ld.ServerConfig()
	}
	if cfg.UsesSASL() {
		for _, m := range cfg.Mechanisms {
			ls.mechs[m] = true
			if m == sasl.OAuthBearer {
				if ls.oauth, err = sasl.NewValidator(cfg.OAuth); err != nil {
					return nil, fmt.Errorf("listener %s: %w", lc.Name, err)
				}
			}
		}
	}
	return ls, nil
}

// credentials adapts the catalog to sasl.Credentials.
type credentials struct{ s *Server }

func (c credentials) ScramCredential(user, mech string) (sasl.ScramCredential, bool) {
	cc, ok := c.s.catalog.(credentialCatalog)
	if !ok {
		return sasl.ScramCredential{}, false
	}
	cr, ok := cc.ScramCredential(user, mech)
	if !ok {
		return sasl.ScramCredential{}, false
	}
	return sasl.ScramCredential{Salt: cr.Salt, StoredKey: cr.StoredKey, ServerKey: cr.ServerKey, Iterations: cr.Iterations}, true
}

// handshakeTLS runs the TLS handshake of a new connection within
// socket.request.timeout.ms (10 s when unbounded), and returns the
// connection's principal: the client certificate's subject, as Kafka's
// default principal builder gives it ("User:CN=...,OU=..."), mapped by the
// listener's ssl.principal.mapping.rules, or ANONYMOUS without one. A
// subject no rule maps fails the connection, as in Kafka.
func (s *Server) handshakeTLS(l *listener, nc net.Conn) (*tls.Conn, string, error) {
	tc := tls.Server(nc, l.sec.tls)
	limit := 10 * time.Second
	if s.cfg.SocketRequestTimeoutMs > 0 {
		limit = time.Duration(s.cfg.SocketRequestTimeoutMs) * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(s.ctx, limit)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, "", err
	}
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return tc, acl.Anonymous, nil
	}
	dn := subjectName(st.PeerCertificates[0].RawSubject)
	if pm := l.sec.cfg.PrincipalMapper; pm != nil && !l.sec.cfg.UsesSASL() {
		name, err := pm.Name(dn)
		if err != nil {
			// Kafka fails the connection: "Failed to map name ... based
			// on SSL principal mapping rules".
			return nil, "", fmt.Errorf("%w: %w", errPrincipalMapping, err)
		}
		dn = name
	}
	return tc, "User:" + dn, nil
}

// errPrincipalMapping fails a connection whose certificate subject no
// ssl.principal.mapping.rules rule maps.
var errPrincipalMapping = errors.New("ssl.principal.mapping.rules")

// subjectName is tlsconfig.SubjectName: the subject as Kafka's default
// principal builder names it.
func subjectName(raw []byte) string { return tlsconfig.SubjectName(raw) }

// saslState is where a SASL connection is in its authentication (Kafka's
// SaslServerAuthenticator states): waiting for SaslHandshake (ApiVersions
// allowed too), waiting for SaslAuthenticate, or authenticated.
type saslState int

const (
	saslAwaitHandshake saslState = iota
	saslAwaitAuthenticate
	saslAuthenticated
)

// saslConn is the SASL part of a connection on a SASL_* listener. Only
// the read loop touches it: requests run their first stage in order.
type saslConn struct {
	state   saslState
	mech    string
	session sasl.Session
	// reauth is set while a re-authentication (KIP-368) runs; expiry
	// is when the authenticated session lapses (zero: never). Once
	// authenticated, mech stays the session's (a re-authentication must
	// keep it) and conn.principal is User:<the authenticated user>.
	reauth bool
	expiry time.Time
	// rawTokens: after a SaslHandshake v0, the next frames are bare SASL
	// tokens (handleRawToken) until the exchange ends.
	rawTokens bool
}

// errIllegalSaslState closes a connection that sent a request its SASL
// state does not allow, without an answer, as Kafka does.
type errIllegalSaslState struct{ key int16 }

func (e errIllegalSaslState) Error() string {
	return fmt.Sprintf("unexpected %s request during SASL authentication: closing", apiName(e.key))
}

// errAuthClose closes a connection after its answer is written: a failed
// authentication, an unsupported mechanism, an expired session.
type errAuthClose struct{ msg string }

func (e errAuthClose) Error() string { return e.msg }

func isAuthClose(err error) bool {
	var a errAuthClose
	var i errIllegalSaslState
	return errors.As(err, &a) || errors.As(err, &i)
}

// checkAuth is the gate every request passes before it is decoded: on a
// SASL listener, only ApiVersions and SaslHandshake before the handshake,
// only SaslAuthenticate after it, and once authenticated anything until
// the session lapses; after that only a re-authentication.
func (c *conn) checkAuth(key int16) error {
	sc := c.sasl
	if sc == nil {
		return nil
	}
	switch sc.state {
	case saslAwaitHandshake:
		if key == 18 || key == 17 {
			return nil
		}
	case saslAwaitAuthenticate:
		if key == 36 {
			return nil
		}
		if sc.reauth && key == 18 {
			return nil
		}
	case saslAuthenticated:
		if !sc.expiry.IsZero() && !time.Now().Before(sc.expiry) && key != 17 {
			return errAuthClose{msg: "SASL session expired (connections.max.reauth.ms or token lifetime) without re-authentication: closing"}
		}
		return nil
	}
	return errIllegalSaslState{key: key}
}

func (m *Metrics) saslAuth(listener, mech string, ok bool) {
	result := "failure"
	if ok {
		result = "success"
	}
	m.authentications.WithLabelValues(listener, mech, result).Inc()
}

var errNoCredentialStore = errors.New("this broker's catalog keeps no SCRAM credentials")

// completeSasl ends a successful exchange: the principal (which a
// re-authentication must not change) and the session lifetime, as Kafka's
// SaslServerAuthenticator computes it: the credential's expiry (an
// OAUTHBEARER token's exp) and connections.max.reauth.ms, the earlier of
// the two; 0 when neither applies. msg is a failure to report.
func (c *conn) completeSasl() (lifetime time.Duration, msg string) {
	sc := c.sasl
	principal := sc.session.Principal()
	if sc.reauth && "User:"+principal != c.principal {
		return 0, "Cannot change principals during re-authentication from " + c.principal + " to User:" + principal
	}
	now := time.Now()
	maxReauth := c.listener.sec.cfg.MaxReauth
	if exp := sc.session.Expiry(); !exp.IsZero() {
		lifetime = max(exp.Sub(now), time.Millisecond)
		if maxReauth > 0 {
			lifetime = min(lifetime, maxReauth)
		}
	} else if maxReauth > 0 {
		lifetime = maxReauth
	}
	sc.expiry = time.Time{}
	if lifetime > 0 {
		sc.expiry = now.Add(lifetime)
	}
	sc.state, sc.reauth, sc.session, sc.rawTokens = saslAuthenticated, false, nil, false
	c.principal = "User:" + principal
	return lifetime, ""
}

// handleRawToken runs one step of a SaslHandshake v0 exchange: the frame
// is a bare SASL token, without a request header, and so is the answer.
// A failure closes the connection without an answer: v0 has no way to
// carry one (Kafka closes too).
func (c *conn) handleRawToken(frame []byte, held int64) error {
	c.srv.requestBytes.release(held)
	sc := c.sasl
	out, done, err := sc.session.Step(frame)
	if err == nil && done {
		if _, msg := c.completeSasl(); msg != "" {
			err = errors.New(msg)
		}
	}
	if err != nil {
		c.srv.metrics.saslAuth(c.listener.cfg.Name, sc.mech, false)
		return errAuthClose{msg: "SASL authentication (handshake v0) failed (" + sc.mech + "): " + err.Error() + ": closing"}
	}
	if done {
		c.srv.metrics.saslAuth(c.listener.cfg.Name, sc.mech, true)
	}
	sl := &slot{done: make(chan struct{}), raw: out, rawToken: true}
	c.enqueue(sl)
	c.answer(sl, nil)
	return nil
}
