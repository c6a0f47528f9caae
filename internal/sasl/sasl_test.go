package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// creds is an in-memory credential store.
type creds map[[2]string]ScramCredential

func (c creds) ScramCredential(user, mech string) (ScramCredential, bool) {
	cr, ok := c[[2]string{user, mech}]
	return cr, ok
}

func testCreds(t testing.TB, users map[string]string) creds {
	t.Helper()
	c := creds{}
	for u, pw := range users {
		for _, m := range []string{ScramSHA256, ScramSHA512} {
			cr, err := NewScramCredential(m, pw, 4096)
			if err != nil {
				t.Fatal(err)
			}
			c[[2]string{u, m}] = cr
		}
	}
	return c
}

func runClient(t *testing.T, srv Session, first []byte, challenge func([]byte) (bool, []byte, error)) (string, error) {
	t.Helper()
	msg := first
	for i := 0; i < 4; i++ {
		out, done, err := srv.Step(msg)
		if err != nil {
			return "", err
		}
		cdone, next, cerr := challenge(out)
		if cerr != nil {
			t.Fatalf("client refused the server's answer: %v", cerr)
		}
		if done {
			if !cdone && next != nil {
				t.Fatalf("server done but the client wants to go on")
			}
			return srv.Principal(), nil
		}
		msg = next
	}
	t.Fatal("exchange did not end")
	return "", nil
}

func TestScramWithFranzGoClient(t *testing.T) {
	c := testCreds(t, map[string]string{"alice": "pw-a", "we,ird=name": "pw-w"})
	for _, tc := range []struct {
		name, user, pass string
		sha512           bool
		err              string
	}{
		{name: "sha256", user: "alice", pass: "pw-a"},
		{name: "sha512", user: "alice", pass: "pw-a", sha512: true},
		{name: "escaped name", user: "we,ird=name", pass: "pw-w", sha512: true},
		{name: "wrong password", user: "alice", pass: "nope", err: "invalid credentials with SASL mechanism SCRAM-SHA-256"},
		{name: "unknown user: the same answer as a wrong password", user: "bob", pass: "pw-a", sha512: true, err: "invalid credentials with SASL mechanism SCRAM-SHA-512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := scram.Auth{User: tc.user, Pass: tc.pass}
			m, mech := a.AsSha256Mechanism(), ScramSHA256
			if tc.sha512 {
				m, mech = a.AsSha512Mechanism(), ScramSHA512
			}
			cs, first, err := m.Authenticate(context.Background(), "broker")
			if err != nil {
				t.Fatal(err)
			}
			srv, err := NewSession(mech, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := runClient(t, srv, first, cs.Challenge)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !IsAuthError(err) {
					t.Fatalf("error %v, want an auth error containing %q", err, tc.err)
				}
				return
			}
			if err != nil || p != tc.user {
				t.Fatalf("principal %q, error %v", p, err)
			}
		})
	}
}

// Malformed or hostile SCRAM messages are refused as auth errors, never a
// panic; a final message whose nonce ends with the server's is accepted as
// Kafka's server does (librdkafka < 2.2 sends its nonce twice).
func TestScramMessages(t *testing.T) {
	c := testCreds(t, map[string]string{"alice": "pw"})
	for _, first := range []string{"", "n", "n,,", "p=tls-unique,,n=alice,r=abc", "x,,n=alice,r=abc", "n,,r=abc,n=alice",
		"n,,n=alice,r=", "n,,n=al=ZZice,r=abc", "n,a=bob,n=alice,r=abc", "n,b,n=alice,r=abc"} {
		s, _ := NewSession(ScramSHA256, c, nil)
		if _, _, err := s.Step([]byte(first)); err == nil || !IsAuthError(err) {
			t.Errorf("client-first %q: %v, want an auth error", first, err)
		}
	}
	s, _ := NewSession(ScramSHA256, c, nil)
	out, _, err := s.Step([]byte("n,,n=alice,r=cnonce"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := strings.TrimPrefix(strings.Split(string(out), ",")[0], "r=")
	for _, final := range []string{"", "c=biws,r=" + nonce, "c=biws,r=other,p=AAAA", "c=eSws,r=" + nonce + ",p=AAAA",
		"c=biws,r=" + nonce + ",p=!!!", "r=" + nonce + ",c=biws,p=AAAA"} {
		s2 := *s.(*scramSession)
		if _, _, err := s2.Step([]byte(final)); err == nil || !IsAuthError(err) {
			t.Errorf("client-final %q: %v, want an auth error", final, err)
		}
	}
	// librdkafka's doubled nonce, with a correct proof.
	cr, _ := c.ScramCredential("alice", ScramSHA256)
	salted, _ := SaltPassword(ScramSHA256, "pw", cr.Salt, int(cr.Iterations))
	m := scramMechs[ScramSHA256]
	woProof := "c=biws,r=cnonce" + nonce
	auth := "n=alice,r=cnonce," + string(out) + "," + woProof
	clientKey := hmacSum(m.hash, salted, []byte("Client Key"))
	sig := hmacSum(m.hash, cr.StoredKey, []byte(auth))
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	if _, done, err := s.Step([]byte(woProof + ",p=" + base64.StdEncoding.EncodeToString(proof))); err != nil || !done {
		t.Fatalf("doubled nonce: done %v, %v", done, err)
	}
}

func TestPlain(t *testing.T) {
	c := testCreds(t, map[string]string{"alice": "pw-a"})
	// A user with only a SCRAM-SHA-256 credential logs in with PLAIN too.
	only256, _ := NewScramCredential(ScramSHA256, "pw-b", 4096)
	c[[2]string{"bob", ScramSHA256}] = only256
	for _, tc := range []struct {
		msg, user, err string
	}{
		{msg: "\x00alice\x00pw-a", user: "alice"},
		{msg: "alice\x00alice\x00pw-a", user: "alice"},
		{msg: "\x00bob\x00pw-b", user: "bob"},
		{msg: "\x00alice\x00wrong", err: "Invalid username or password"},
		{msg: "\x00carol\x00pw-a", err: "Invalid username or password"},
		{msg: "bob\x00alice\x00pw-a", err: "authorization id"},
		{msg: "\x00\x00pw", err: "username not specified"},
		{msg: "\x00alice\x00", err: "password not specified"},
		{msg: "alice", err: "expected 3 tokens"},
	} {
		s, _ := NewSession(Plain, c, nil)
		_, done, err := s.Step([]byte(tc.msg))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.msg, err, tc.err)
			}
			continue
		}
		if err != nil || !done || s.Principal() != tc.user {
			t.Errorf("%q: done %v principal %q error %v", tc.msg, done, s.Principal(), err)
		}
	}
	// franz-go's PLAIN client message is what the session reads.
	_, first, _ := plain.Auth{User: "alice", Pass: "pw-a"}.AsMechanism().Authenticate(context.Background(), "b")
	s, _ := NewSession(Plain, c, nil)
	if _, done, err := s.Step(first); err != nil || !done {
		t.Fatalf("franz-go PLAIN: %v", err)
	}
}

// jwksFile writes a key set with an RSA and an EC key.
func jwksFile(t testing.TB, path string, rsaKey *rsa.PublicKey, ecKey *ecdsa.PublicKey) {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	keys := []map[string]string{
		{"kty": "RSA", "kid": "rsa-1", "use": "sig", "n": b64(rsaKey.N.Bytes()), "e": b64(big.NewInt(int64(rsaKey.E)).Bytes())},
		{"kty": "EC", "kid": "ec-1", "crv": "P-256", "x": b64(ecKey.X.FillBytes(make([]byte, 32))), "y": b64(ecKey.Y.FillBytes(make([]byte, 32)))},
		{"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
	}
	js, _ := json.Marshal(map[string]any{"keys": keys})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func signJWT(t *testing.T, alg, kid string, key crypto.Signer, claims map[string]any) string {
	t.Helper()
	hdr, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"})
	body, _ := json.Marshal(claims)
	signed := base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(body)
	sum := sha256.Sum256([]byte(signed))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		sig, _ = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
	case *ecdsa.PrivateKey:
		r, s, _ := ecdsa.Sign(rand.Reader, k, sum[:])
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func unsigned(alg string, claims map[string]any, sig string) string {
	hdr, _ := json.Marshal(map[string]string{"alg": alg, "kid": "rsa-1"})
	body, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(body) + "." + sig
}

func TestOAuthValidator(t *testing.T) {
	dir := t.TempDir()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	jwks := filepath.Join(dir, "jwks.json")
	jwksFile(t, jwks, &rsaKey.PublicKey, &ecKey.PublicKey)
	v, err := NewValidator(OAuthConfig{JWKSURL: "file://" + jwks, ExpectedAudience: []string{"kafka", "other"}, ExpectedIssuer: "https://idp",
		ClockSkew: 30 * time.Second, SubClaimName: "client_id"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	base := func() map[string]any {
		return map[string]any{"client_id": "svc", "iss": "https://idp", "aud": []string{"x", "kafka"}, "exp": now.Add(time.Hour).Unix(),
			"iat": now.Unix(), "scope": "read write"}
	}
	with := func(k string, val any) map[string]any {
		c := base()
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		token string
		err   string
	}{
		{name: "RS256", token: signJWT(t, "RS256", "rsa-1", rsaKey, base())},
		{name: "ES256", token: signJWT(t, "ES256", "ec-1", ecKey, base())},
		{name: "audience as a string", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("aud", "other"))},
		{name: "scope as a list", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("scope", []string{"a", "b"}))},
		{name: "expired within skew", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("exp", now.Add(-10*time.Second).Unix()))},
		{name: "expired", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("exp", now.Add(-time.Minute).Unix())), err: "expired"},
		{name: "no exp", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("exp", nil)), err: "exp"},
		{name: "nbf ahead", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("nbf", now.Add(time.Hour).Unix())), err: "nbf"},
		{name: "iat ahead", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("iat", now.Add(time.Hour).Unix())), err: "iat"},
		{name: "wrong issuer", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("iss", "https://evil")), err: "iss"},
		{name: "wrong audience", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("aud", "y")), err: "aud"},
		{name: "no subject", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("client_id", nil)), err: "client_id"},
		{name: "bad scope", token: signJWT(t, "RS256", "rsa-1", rsaKey, with("scope", 7)), err: "scope"},
		{name: "foreign key", token: signJWT(t, "RS256", "rsa-1", otherKey, base()), err: "signature"},
		{name: "alg does not match key", token: signJWT(t, "ES256", "rsa-1", ecKey, base()), err: "signature"},
		{name: "unknown kid", token: signJWT(t, "RS256", "nope", rsaKey, base()), err: "no key"},
		{name: "alg none", token: unsigned("none", base(), "AAAA"), err: "alg"},
		{name: "alg none, no signature", token: unsigned("none", base(), ""), err: "signature"},
		{name: "HS256 with the oct key", token: signJWT(t, "HS256", "hmac", rsaKey, base()), err: "no key"},
		{name: "two parts", token: "a.b", err: "malformed"},
	} {
		tok, err := v.Validate(tc.token)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || tok.Principal != "svc" {
			t.Errorf("%s: %+v, %v", tc.name, tok, err)
		}
	}
	// Key rotation: a token signed by a new key (new kid) validates once
	// the file names it, without a restart.
	newKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	time.Sleep(10 * time.Millisecond)
	jwksFile(t, jwks, &newKey.PublicKey, &ecKey.PublicKey)
	later := time.Now().Add(2 * time.Second)
	v.now = func() time.Time { return later }
	if _, err := v.Validate(signJWT(t, "RS256", "rsa-1", newKey, base())); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
}

func TestOAuthSession(t *testing.T) {
	dir := t.TempDir()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := filepath.Join(dir, "jwks.json")
	jwksFile(t, jwks, &rsaKey.PublicKey, &ecKey.PublicKey)
	v, err := NewValidator(OAuthConfig{JWKSURL: "file://" + jwks})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	tok := signJWT(t, "RS256", "rsa-1", rsaKey, map[string]any{"sub": "svc", "exp": exp.Unix()})
	_, first, _ := oauth.Auth{Token: tok, Extensions: map[string]string{"traceId": "1"}}.AsMechanism().Authenticate(context.Background(), "b")
	s, _ := NewSession(OAuthBearer, nil, v)
	if _, done, err := s.Step(first); err != nil || !done || s.Principal() != "svc" || !s.Expiry().Equal(exp) {
		t.Fatalf("valid token: done %v principal %q expiry %v, %v", done, s.Principal(), s.Expiry(), err)
	}
	// An invalid token: an error status first (RFC 7628), the failure
	// after the client's acknowledgement.
	_, bad, _ := oauth.Auth{Token: "x.y.z"}.AsMechanism().Authenticate(context.Background(), "b")
	s, _ = NewSession(OAuthBearer, nil, v)
	out, done, err := s.Step(bad)
	if err != nil || done || !strings.Contains(string(out), "invalid_token") {
		t.Fatalf("invalid token: %q done %v %v", out, done, err)
	}
	if _, _, err := s.Step([]byte{1}); err == nil || !IsAuthError(err) {
		t.Fatalf("after the acknowledgement: %v", err)
	}
	for _, msg := range []string{"", "n,,", "n,,\x01auth=Basic abc\x01\x01", "n,,\x01\x01", "x,,\x01auth=Bearer t\x01\x01", "n,,auth=Bearer t"} {
		s, _ = NewSession(OAuthBearer, nil, v)
		if _, _, err := s.Step([]byte(msg)); err == nil || !IsAuthError(err) {
			t.Errorf("%q: %v, want an auth error", msg, err)
		}
	}
	if _, err := NewValidator(OAuthConfig{}); err == nil {
		t.Error("a validator without a JWKS URL was made")
	}
}
