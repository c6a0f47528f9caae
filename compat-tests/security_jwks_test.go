package compat

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

// TestSecureOAuthJWKSEndpoint: the broker reads its OAUTHBEARER keys from
// an identity provider's JWKS endpoint over HTTP (a real HTTP server in
// the test), and franz-go authenticates with tokens the provider's keys
// sign. The provider rotates from one key to another: a token of the new
// key is accepted at once (its unknown key id makes the broker fetch the
// set again, without waiting for the hour-long refresh interval), a token
// of the dropped key is then refused with SASL_AUTHENTICATION_FAILED, and
// tokens naming a key id the provider never had make the broker ask the
// endpoint once, not once per token.
func TestSecureOAuthJWKSEndpoint(t *testing.T) {
	t.Parallel()
	old, _ := rsa.GenerateKey(rand.Reader, 2048)
	next, _ := rsa.GenerateKey(rand.Reader, 2048)
	var (
		mu       sync.Mutex
		served   = map[string]*rsa.PublicKey{"idp-1": &old.PublicKey}
		requests atomic.Int64
	)
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		mu.Lock()
		defer mu.Unlock()
		b64 := base64.RawURLEncoding.EncodeToString
		var keys []map[string]string
		for kid, k := range served {
			keys = append(keys, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	}))
	t.Cleanup(idp.Close)
	sb := startSecure(t, "--set", "sasl.oauthbearer.jwks.endpoint.url="+idp.URL+"/.well-known/jwks.json",
		"--set", "sasl.oauthbearer.jwks.endpoint.refresh.ms=3600000")
	token := func(key *rsa.PrivateKey, kid, sub string) string {
		now := time.Now()
		return signJWT(t, key, kid, map[string]any{"sub": sub, "iss": oauthIssuer, "aud": oauthAudience,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "kafka"})
	}
	ping := func(tok string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cl := sb.client(t, oauth.Auth{Token: tok}.AsMechanism())
		defer cl.Close()
		return cl.Ping(ctx)
	}
	refused := func(err error) bool {
		return err != nil && strings.Contains(err.Error(), kerr.SaslAuthenticationFailed.Message)
	}
	asked := func() int64 { return requests.Load() }

	start := asked()
	if start < 1 {
		t.Fatalf("the broker started without asking the JWKS endpoint")
	}
	cl := sb.client(t, oauth.Auth{Token: token(old, "idp-1", "svc-jwks")}.AsMechanism())
	if err := roundTripRecord(t, cl, "jwks-orders", "signed by idp-1"); err != nil {
		t.Fatalf("a token of the provider's key idp-1: %v", err)
	}
	if n := asked(); n != start {
		t.Fatalf("a known key id made the broker ask the endpoint (%d times, %d at start)", n, start)
	}

	// Rotation: the provider now publishes only idp-2.
	mu.Lock()
	served = map[string]*rsa.PublicKey{"idp-2": &next.PublicKey}
	mu.Unlock()
	if err := ping(token(next, "idp-2", "svc-jwks")); err != nil {
		t.Fatalf("a token of the new key idp-2, refresh interval an hour away: %v", err)
	}
	if n := asked(); n != start+1 {
		t.Fatalf("the new key id: the endpoint was asked %d times since start, want 1", n-start)
	}
	cl2 := sb.client(t, oauth.Auth{Token: token(next, "idp-2", "svc-jwks")}.AsMechanism())
	if err := roundTripRecord(t, cl2, "jwks-orders", "signed by idp-2"); err != nil {
		t.Fatalf("producing with a token of idp-2: %v", err)
	}
	if err := ping(token(old, "idp-1", "svc-jwks")); !refused(err) {
		t.Fatalf("a token of idp-1, which the provider dropped: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	before := asked()
	for i := 0; i < 3; i++ {
		if err := ping(token(next, "forged", "svc-jwks")); !refused(err) {
			t.Fatalf("a token naming key id forged: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
	}
	if n := asked() - before; n != 1 {
		t.Fatalf("three tokens of the unknown key id forged made the broker ask the endpoint %d times, want 1", n)
	}
}
