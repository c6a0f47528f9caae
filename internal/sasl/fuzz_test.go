package sasl

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"path/filepath"
	"testing"
)

// The SASL decoders take bytes straight from unauthenticated clients:
// whatever they are sent, they answer or refuse with an auth error, and
// never panic or hang. Seeds: testdata/fuzz.

func FuzzScramSession(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("n,a=alice,n=alice,r=abc,ext=1"), []byte("c=bixhPWFsaWNlLA==,r=abcX,p="))
	f.Add([]byte("y,,n==3D=2C,r=x"), []byte(""))
	c := testCreds(f, map[string]string{"alice": "pw", "=,": "pw"})
	f.Fuzz(func(t *testing.T, first, final []byte) {
		for _, mech := range []string{ScramSHA256, ScramSHA512} {
			s, _ := NewSession(mech, c, nil)
			out, done, err := s.Step(first)
			if err != nil {
				if !IsAuthError(err) {
					t.Fatalf("client-first %q: %v is not an auth error", first, err)
				}
				continue
			}
			if done || len(out) == 0 {
				t.Fatalf("client-first %q: done %v, answer %q", first, done, out)
			}
			if _, done, err = s.Step(final); err != nil && !IsAuthError(err) {
				t.Fatalf("client-final %q: %v is not an auth error", final, err)
			}
			if done && s.Principal() == "" {
				t.Fatal("authenticated without a principal")
			}
		}
	})
}

func FuzzPlainSession(f *testing.F) {
	f.Add([]byte("\x00alice\x00pw"))
	f.Add([]byte("alice\x00alice\x00pw\x00"))
	c := testCreds(f, map[string]string{"alice": "pw"})
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, _ := NewSession(Plain, c, nil)
		_, done, err := s.Step(msg)
		if err != nil && !IsAuthError(err) {
			t.Fatalf("%q: %v is not an auth error", msg, err)
		}
		if done && (s.Principal() != "alice" || string(msg) != "\x00alice\x00pw" && string(msg) != "alice\x00alice\x00pw") {
			t.Fatalf("%q authenticated as %q", msg, s.Principal())
		}
	})
}

func FuzzOAuthSession(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer a.b.c\x01\x01"))
	f.Add([]byte("n,a=svc,\x01auth=Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzIn0.AAAA\x01host=x\x01\x01"))
	f.Add([]byte("n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJzIn0.\x01\x01"))
	dir := f.TempDir()
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := filepath.Join(dir, "jwks.json")
	jwksFile(f, jwks, &rsaKey.PublicKey, &ecKey.PublicKey)
	v, err := NewValidator(OAuthConfig{JWKSURL: "file://" + jwks})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		s, _ := NewSession(OAuthBearer, nil, v)
		_, done, err := s.Step(msg)
		if err != nil && !IsAuthError(err) {
			t.Fatalf("%q: %v is not an auth error", msg, err)
		}
		if done {
			t.Fatalf("%q: authenticated without a token signed by the key set", msg)
		}
		if err == nil {
			if _, _, err := s.Step([]byte{1}); err == nil {
				t.Fatalf("%q: not refused after the error status", msg)
			}
		}
	})
}
