package sasl

import (
	"bytes"
	"strconv"
	"time"
)

// plainSession checks RFC 4616's one message, authzid NUL authcid NUL
// passwd, against the user's SCRAM credentials: SCRAM-SHA-512 when the user
// has one, else SCRAM-SHA-256. Messages follow Kafka's PlainSaslServer.
type plainSession struct {
	creds Credentials
	user  string
	done  bool
}

func (s *plainSession) Principal() string { return s.user }
func (s *plainSession) Expiry() time.Time { return time.Time{} }

func (s *plainSession) Step(in []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, fail("Authentication failed: unexpected PLAIN message after the exchange ended")
	}
	s.done = true
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 {
		return nil, false, fail("Invalid SASL/PLAIN response: expected 3 tokens, got " + strconv.Itoa(len(parts)))
	}
	authzid, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" {
		return nil, false, fail("Authentication failed: username not specified")
	}
	if password == "" {
		return nil, false, fail("Authentication failed: password not specified")
	}
	if authzid != "" && authzid != user {
		return nil, false, fail("Authentication failed: Client requested an authorization id that is different from username")
	}
	for _, mech := range []string{ScramSHA512, ScramSHA256} {
		if c, ok := s.creds.ScramCredential(user, mech); ok {
			if !c.checkPassword(mech, password) {
				break
			}
			s.user = user
			return nil, true, nil
		}
	}
	return nil, false, fail("Authentication failed: Invalid username or password")
}
