package server

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/sasl"
)

// SaslAuthenticate (key 36). Supported: v0-2.
//
// Semantics: carries one message of the mechanism chosen by SaslHandshake
// (internal/sasl runs the exchange). A failure is answered
// SASL_AUTHENTICATION_FAILED with Kafka's message and the connection is
// closed after the answer. Success sets the connection's principal
// ("User:<name>") and, with connections.max.reauth.ms or an OAUTHBEARER
// token's expiry, the session lifetime (KIP-368): v1+ tell the client,
// which re-authenticates before it lapses; a request after it lapses
// closes the connection. A re-authentication must end in the same
// principal. Outside an exchange: ILLEGAL_SASL_STATE.
// Version notes: v1 session lifetime; v2 flexible.
// Roles: every broker.
func init() { register(36, handleSaslAuthenticate) }

func handleSaslAuthenticate(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := rc.conn
	sc := c.sasl
	if sc == nil || sc.state != saslAwaitAuthenticate {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate request received outside a SASL exchange")
		return resp, nil
	}
	what := "authentication"
	if sc.reauth {
		what = "re-authentication"
	}
	failed := func(msg string) (kmsg.Response, error) {
		s.metrics.saslAuth(c.listener.cfg.Name, sc.mech, false)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(msg)
		c.closeAfter = errAuthClose{msg: "SASL " + what + " failed (" + sc.mech + "): closing"}
		return resp, nil
	}
	out, done, err := sc.session.Step(req.SASLAuthBytes)
	if err != nil {
		if !sasl.IsAuthError(err) {
			return failed("Authentication failed during " + what + " due to invalid credentials with SASL mechanism " + sc.mech)
		}
		return failed(err.Error())
	}
	resp.SASLAuthBytes = out
	if !done {
		return resp, nil
	}
	principal := sc.session.Principal()
	if sc.reauth && principal != sc.user {
		return failed("Cannot change principals during re-authentication from User:" + sc.user + " to User:" + principal)
	}
	// The session lifetime, as Kafka's SaslServerAuthenticator computes
	// it: the credential's expiry and connections.max.reauth.ms, the
	// earlier of the two.
	now := time.Now()
	var lifetime time.Duration
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
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
	}
	sc.state, sc.reauth, sc.session = saslAuthenticated, false, nil
	sc.user, sc.authMech = principal, sc.mech
	c.principal = "User:" + principal
	s.metrics.saslAuth(c.listener.cfg.Name, sc.mech, true)
	return resp, nil
}
