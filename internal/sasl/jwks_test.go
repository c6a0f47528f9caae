package sasl

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// jwksServer is an identity provider's JWKS endpoint over HTTP: it serves
// the RSA keys it holds by kid, or fails with 500 while failing is set,
// and counts requests.
type jwksServer struct {
	*httptest.Server
	mu       sync.Mutex
	keys     map[string]*rsa.PublicKey
	failing  bool
	requests atomic.Int64
}

func newJWKSServer(t *testing.T) *jwksServer {
	js := &jwksServer{keys: map[string]*rsa.PublicKey{}}
	js.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		js.requests.Add(1)
		js.mu.Lock()
		defer js.mu.Unlock()
		if js.failing {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		b64 := base64.RawURLEncoding.EncodeToString
		var keys []map[string]string
		for kid, k := range js.keys {
			keys = append(keys, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	}))
	t.Cleanup(js.Close)
	return js
}

func (js *jwksServer) set(keys map[string]*rsa.PublicKey, failing bool) {
	js.mu.Lock()
	js.keys, js.failing = keys, failing
	js.mu.Unlock()
}

// TestOAuthJWKSEndpoint: a JWKS over HTTP, Kafka's RefreshingHttpsJwks
// behaviour: fetched at start and every refresh interval; a token signed
// by a key the set did not hold fetches it again at once (key rotation
// without waiting for the interval), but an unknown key id does so at most
// once a minute, and only 16 such ids are remembered; a failed fetch is
// retried with backoff and keeps the keys held; a key dropped from the set
// stops validating after the next fetch.
func TestOAuthJWKSEndpoint(t *testing.T) {
	k1, _ := rsa.GenerateKey(rand.Reader, 2048)
	k2, _ := rsa.GenerateKey(rand.Reader, 2048)
	js := newJWKSServer(t)
	js.set(map[string]*rsa.PublicKey{"k1": &k1.PublicKey}, false)
	v, err := NewValidator(OAuthConfig{JWKSURL: js.URL + "/jwks.json", JWKSRefresh: time.Hour,
		JWKSRetryBackoff: 10 * time.Millisecond, JWKSRetryBackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	v.now = func() time.Time { return clock }
	claims := func() map[string]any {
		return map[string]any{"sub": "svc", "exp": clock.Add(time.Hour).Unix(), "iat": clock.Unix()}
	}
	fetches := func(want int64, what string) {
		t.Helper()
		if got := js.requests.Load(); got != want {
			t.Fatalf("%s: the JWKS endpoint was asked %d times, want %d", what, got, want)
		}
	}
	fetches(1, "at start")
	if _, err := v.Validate(signJWT(t, "RS256", "k1", k1, claims())); err != nil {
		t.Fatalf("k1: %v", err)
	}
	fetches(1, "a known key id")

	// Rotation: the provider adds k2 and signs with it.
	js.set(map[string]*rsa.PublicKey{"k1": &k1.PublicKey, "k2": &k2.PublicKey}, false)
	if tok, err := v.Validate(signJWT(t, "RS256", "k2", k2, claims())); err != nil || tok.Principal != "svc" {
		t.Fatalf("a token of the new key k2: %+v, %v", tok, err)
	}
	fetches(2, "a new key id")

	// An unknown id: one fetch, then none for that id within a minute.
	for i := 0; i < 5; i++ {
		if _, err := v.Validate(signJWT(t, "RS256", "forged", k2, claims())); err == nil || !strings.Contains(err.Error(), "no key") {
			t.Fatalf("unknown kid: %v", err)
		}
	}
	fetches(3, "five tokens of one unknown key id")
	clock = clock.Add(61 * time.Second)
	v.Validate(signJWT(t, "RS256", "forged", k2, claims()))
	fetches(4, "the unknown key id a minute later")
	// A key id longer than 1000 characters never fetches.
	v.Validate(signJWT(t, "RS256", strings.Repeat("x", 1001), k2, claims()))
	fetches(4, "a 1001-character key id")
	// Distinct ids: one fetch each, at most 16 remembered.
	for i := 0; i < 20; i++ {
		v.Validate(signJWT(t, "RS256", fmt.Sprint("id-", i), k2, claims()))
	}
	fetches(24, "20 distinct unknown key ids")
	if n := len(v.missing); n != missingKeyIDMaxEntries {
		t.Fatalf("%d unknown key ids remembered, want %d", n, missingKeyIDMaxEntries)
	}

	// The provider drops k1; after the refresh interval the set is fetched
	// again and k1's tokens fail.
	js.set(map[string]*rsa.PublicKey{"k2": &k2.PublicKey}, false)
	if _, err := v.Validate(signJWT(t, "RS256", "k1", k1, claims())); err != nil {
		t.Fatalf("k1 before the refresh interval: %v", err)
	}
	clock = clock.Add(time.Hour)
	if _, err := v.Validate(signJWT(t, "RS256", "k1", k1, claims())); err == nil {
		t.Fatal("k1, dropped from the set, still validates after the refresh interval")
	}
	fetches(26, "the refresh interval, then k1 missing from the set")

	// The endpoint fails: the fetch is retried with backoff (10, 20, 40,
	// 80 ms within 200 ms: 5 attempts, fewer when requests are slow), and
	// the keys held stay in use.
	js.set(nil, true)
	clock = clock.Add(time.Hour)
	before := js.requests.Load()
	if _, err := v.Validate(signJWT(t, "RS256", "k2", k2, claims())); err != nil {
		t.Fatalf("k2 while the endpoint fails: %v", err)
	}
	if n := js.requests.Load() - before; n < 2 || n > 6 {
		t.Fatalf("a failing endpoint was asked %d times within the retry backoff, want 2-6", n)
	}
}
