package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"
)

// ScramCredential is what the server keeps of a password (RFC 5802
// section 3): the salt and iteration count it was salted with, StoredKey =
// H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
// HMAC(SaltedPassword, "Server Key").
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

type scramMech struct {
	name string
	hash func() hash.Hash
	// minIter and maxIter are Kafka's bounds (ScramMechanism): 4096 and
	// 16384 for both hashes.
	minIter, maxIter int32
}

var scramMechs = map[string]scramMech{
	ScramSHA256: {ScramSHA256, sha256.New, 4096, 16384},
	ScramSHA512: {ScramSHA512, sha512.New, 4096, 16384},
}

// ScramIterationBounds returns Kafka's iteration bounds for a SCRAM
// mechanism (ok false: not a SCRAM mechanism).
func ScramIterationBounds(mech string) (min, max int32, ok bool) {
	m, ok := scramMechs[mech]
	return m.minIter, m.maxIter, ok
}

// SaltPassword is RFC 5802's Hi(password, salt, iterations).
func SaltPassword(mech string, password string, salt []byte, iterations int) ([]byte, error) {
	m, ok := scramMechs[mech]
	if !ok {
		return nil, fmt.Errorf("sasl: %s is not a SCRAM mechanism", mech)
	}
	return pbkdf2.Key(m.hash, password, salt, iterations, m.hash().Size())
}

// CredentialFromSalted derives the stored credential from a salted password,
// what AlterUserScramCredentials carries (clients salt the password
// themselves, so it never reaches the broker).
func CredentialFromSalted(mech string, salted, salt []byte, iterations int32) (ScramCredential, error) {
	m, ok := scramMechs[mech]
	if !ok {
		return ScramCredential{}, fmt.Errorf("sasl: %s is not a SCRAM mechanism", mech)
	}
	clientKey := hmacSum(m.hash, salted, []byte("Client Key"))
	h := m.hash()
	h.Write(clientKey)
	return ScramCredential{
		Salt:       bytes.Clone(salt),
		StoredKey:  h.Sum(nil),
		ServerKey:  hmacSum(m.hash, salted, []byte("Server Key")),
		Iterations: iterations,
	}, nil
}

// NewScramCredential salts password with a fresh random salt (a bootstrap
// user, tests).
func NewScramCredential(mech, password string, iterations int32) (ScramCredential, error) {
	salt := make([]byte, 32)
	rand.Read(salt)
	salted, err := SaltPassword(mech, password, salt, int(iterations))
	if err != nil {
		return ScramCredential{}, err
	}
	return CredentialFromSalted(mech, salted, salt, iterations)
}

// checkPassword reports whether password matches c (PLAIN over SCRAM
// credentials).
func (c ScramCredential) checkPassword(mech, password string) bool {
	salted, err := SaltPassword(mech, password, c.Salt, int(c.Iterations))
	if err != nil {
		return false
	}
	d, err := CredentialFromSalted(mech, salted, c.Salt, c.Iterations)
	return err == nil && equal(d.StoredKey, c.StoredKey)
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// scramSession is the server side of one SCRAM exchange: client-first,
// server-first, client-final, server-final.
type scramSession struct {
	mech  scramMech
	creds Credentials

	step            int
	user            string
	gs2Header       string
	clientFirstBare string
	serverFirst     string
	nonce           string
	cred            ScramCredential
}

func (s *scramSession) Principal() string { return s.user }
func (s *scramSession) Expiry() time.Time { return time.Time{} }

func (s *scramSession) Step(in []byte) ([]byte, bool, error) {
	switch s.step {
	case 0:
		s.step = 1
		return s.first(string(in))
	case 1:
		s.step = 2
		return s.final(string(in))
	}
	return nil, false, fail("Authentication failed: unexpected SCRAM message after the exchange ended")
}

// first reads client-first-message: gs2-header client-first-message-bare.
func (s *scramSession) first(msg string) ([]byte, bool, error) {
	// gs2-header = gs2-cbind-flag "," [ authzid ] ","
	cbind, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, false, invalidCredentials(s.mech.name)
	}
	switch {
	case cbind == "n" || cbind == "y":
	case strings.HasPrefix(cbind, "p="):
		return nil, false, fail("Authentication failed: channel binding is not supported")
	default:
		return nil, false, invalidCredentials(s.mech.name)
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, false, invalidCredentials(s.mech.name)
	}
	if authzid != "" && !strings.HasPrefix(authzid, "a=") {
		return nil, false, invalidCredentials(s.mech.name)
	}
	s.gs2Header = cbind + "," + authzid + ","
	s.clientFirstBare = bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, invalidCredentials(s.mech.name)
	}
	user, err := unescapeSaslName(attrs[0][2:])
	if err != nil || user == "" {
		return nil, false, invalidCredentials(s.mech.name)
	}
	clientNonce := attrs[1][2:]
	if clientNonce == "" || strings.ContainsAny(clientNonce, ",") {
		return nil, false, invalidCredentials(s.mech.name)
	}
	if authzid != "" {
		az, err := unescapeSaslName(authzid[2:])
		if err != nil || az != user {
			return nil, false, fail("Authentication failed: Client requested an authorization id that is different from username")
		}
	}
	cred, ok := s.creds.ScramCredential(user, s.mech.name)
	if !ok {
		// Kafka's message for a wrong password too: the client does
		// not learn whether the user exists.
		return nil, false, invalidCredentials(s.mech.name)
	}
	s.user, s.cred = user, cred
	var rnd [24]byte
	rand.Read(rnd[:])
	s.nonce = clientNonce + base64.RawURLEncoding.EncodeToString(rnd[:])
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	return []byte(s.serverFirst), false, nil
}

// final reads client-final-message: c=..., r=..., [extensions,] p=...
func (s *scramSession) final(msg string) ([]byte, bool, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, false, invalidCredentials(s.mech.name)
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, false, invalidCredentials(s.mech.name)
	}
	if cb, err := base64.StdEncoding.DecodeString(attrs[0][2:]); err != nil || string(cb) != s.gs2Header {
		return nil, false, invalidCredentials(s.mech.name)
	}
	// Kafka's ScramSaslServer accepts a nonce that ends with the one it
	// sent, and librdkafka before 2.2 relies on it: it sends its own
	// nonce in front of the server's (which already starts with it).
	if !strings.HasSuffix(attrs[1][2:], s.nonce) {
		return nil, false, invalidCredentials(s.mech.name)
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != len(s.cred.StoredKey) {
		return nil, false, invalidCredentials(s.mech.name)
	}
	authMessage := []byte(s.clientFirstBare + "," + s.serverFirst + "," + withoutProof)
	clientSig := hmacSum(s.mech.hash, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ clientSig[j]
	}
	h := s.mech.hash()
	h.Write(clientKey)
	if !equal(h.Sum(nil), s.cred.StoredKey) {
		return nil, false, invalidCredentials(s.mech.name)
	}
	serverSig := hmacSum(s.mech.hash, s.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), true, nil
}

// unescapeSaslName undoes RFC 5802's saslname escaping ("=2C" for ',' and
// "=3D" for '='); any other '=' is malformed.
func unescapeSaslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("bad escape in %q", s)
		}
		i += 2
	}
	return b.String(), nil
}
