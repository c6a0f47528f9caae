// Package sasl holds the server side of the SASL mechanisms the Kafka
// listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (RFC 5802, RFC 7677,
// as Kafka's ScramSaslServer) and OAUTHBEARER (RFC 7628) with JWTs checked
// against a JWKS, as Kafka's OAuthBearerValidatorCallbackHandler does. It
// knows nothing of the Kafka protocol: the server feeds it the bytes of
// each SaslAuthenticate request and sends back what it returns.
//
// Credentials are SCRAM credentials (salt, iterations, StoredKey,
// ServerKey), never passwords; they come from a Credentials lookup (the
// metastore). Kafka checks PLAIN against passwords in its JAAS file; Sluice
// has no JAAS, so PLAIN is checked against the same SCRAM credentials, as
// Redpanda does: the password is salted with the credential's salt and
// iterations and its StoredKey compared. One credential store serves both.
package sasl

import (
	"crypto/subtle"
	"errors"
	"time"
)

// Mechanism names as Kafka spells them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
)

// Mechanisms are the mechanisms this package serves, in Kafka's order.
var Mechanisms = []string{Plain, ScramSHA256, ScramSHA512, OAuthBearer}

// Known reports whether mech is served by this package.
func Known(mech string) bool {
	for _, m := range Mechanisms {
		if m == mech {
			return true
		}
	}
	return false
}

// Credentials finds a user's SCRAM credential for a SCRAM mechanism.
type Credentials interface {
	ScramCredential(user, mechanism string) (ScramCredential, bool)
}

// Session is one authentication exchange on one connection. Step takes the
// client's next message and returns the server's answer; done is set with
// the last answer, when the client is authenticated. An error ends the
// exchange: the client gets SASL_AUTHENTICATION_FAILED with Error's
// message, and the connection is closed.
type Session interface {
	Step(in []byte) (out []byte, done bool, err error)
	// Principal is the authenticated user name (without "User:"), once
	// done.
	Principal() string
	// Expiry is when the credential used stops being valid (a token's
	// exp), or the zero time when it does not expire.
	Expiry() time.Time
}

// Error is an authentication failure. Its message goes to the client, so
// it says no more than Kafka's messages do: never whether a user exists.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func fail(msg string) error { return &Error{Msg: msg} }

// invalidCredentials is Kafka's message for a failure whose detail must not
// reach the client.
func invalidCredentials(mech string) error {
	return fail("Authentication failed during authentication due to invalid credentials with SASL mechanism " + mech)
}

// IsAuthError reports whether err is an authentication failure.
func IsAuthError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// NewSession starts an exchange for mech. creds serves PLAIN and SCRAM,
// oauth serves OAUTHBEARER (nil: OAUTHBEARER is refused).
func NewSession(mech string, creds Credentials, oauth *Validator) (Session, error) {
	switch mech {
	case Plain:
		return &plainSession{creds: creds}, nil
	case ScramSHA256, ScramSHA512:
		return &scramSession{mech: scramMechs[mech], creds: creds}, nil
	case OAuthBearer:
		if oauth == nil {
			return nil, errors.New("sasl: OAUTHBEARER has no validator configured")
		}
		return &oauthSession{v: oauth}, nil
	}
	return nil, errors.New("sasl: unknown mechanism " + mech)
}

func equal(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }
