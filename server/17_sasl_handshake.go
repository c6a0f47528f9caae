package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/sasl"
)

// SaslHandshake (key 17). Supported: v0-1. After v1 the tokens travel in
// SaslAuthenticate; after v0 they follow as bare size-prefixed frames
// (conn.handleRawToken), answered the same way. Kafka 4 dropped v0
// (KIP-896), but librdkafka (kcat, confluent-kafka) decides that a broker
// speaks SASL at all from v0 being in the advertised range, as it does for
// Produce v0, and then uses v1.
//
// Semantics: on a SASL_* listener before authentication, picks the
// mechanism; one the listener does not enable (sasl.enabled.mechanisms)
// gets UNSUPPORTED_SASL_MECHANISM with the enabled list, and the
// connection is closed after the answer, as Kafka does. Once
// authenticated, a handshake starts a re-authentication (KIP-368) when
// the session has a lifetime; the mechanism must stay the same. Anywhere
// else (PLAINTEXT and SSL listeners, an authenticated session that never
// expires) the answer is ILLEGAL_SASL_STATE.
// Roles: every broker.
func init() { register(17, handleSaslHandshake) }

func handleSaslHandshake(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	c := rc.conn
	sc := c.sasl
	if sc == nil || sc.state == saslAwaitAuthenticate || (sc.state == saslAuthenticated && sc.expiry.IsZero()) {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, nil
	}
	sec := c.listener.sec
	for _, m := range sec.cfg.Mechanisms {
		resp.SupportedMechanisms = append(resp.SupportedMechanisms, m)
	}
	reauth := sc.state == saslAuthenticated
	if !sec.mechs[req.Mechanism] || (reauth && req.Mechanism != sc.mech) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.closeAfter = errAuthClose{msg: "client asked for SASL mechanism " + quote(req.Mechanism) + ", which this listener does not enable: closing"}
		return resp, nil
	}
	session, err := sasl.NewSession(req.Mechanism, credentials{s}, sec.oauth)
	if err != nil {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.closeAfter = errAuthClose{msg: err.Error()}
		return resp, nil
	}
	sc.state, sc.mech, sc.session, sc.reauth = saslAwaitAuthenticate, req.Mechanism, session, reauth
	// v0: the tokens follow as bare frames, not in SaslAuthenticate.
	sc.rawTokens = req.Version == 0
	return resp, nil
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return "\"" + s + "\""
}
