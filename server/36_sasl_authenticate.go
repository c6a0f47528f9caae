package server

import (
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
	lifetime, msg := c.completeSasl()
	if msg != "" {
		return failed(msg)
	}
	resp.SessionLifetimeMillis = lifetime.Milliseconds()
	s.metrics.saslAuth(c.listener.cfg.Name, sc.mech, true)
	return resp, nil
}
