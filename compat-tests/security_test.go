package compat

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/compat-tests/harness"
)

// The secure broker of these tests: `sluice dev --secure` (SASL_SSL, a CA
// it generates) with the bootstrap user admin, and PLAIN and OAUTHBEARER
// enabled beside SCRAM, tokens checked against a JWKS file the test
// writes, signed by a key only the test holds.
const (
	secureAdmin     = "admin"
	secureAdminPass = "admin-secret"
	oauthIssuer     = "https://issuer.sluice.test"
	oauthAudience   = "sluice"
	oauthKid        = "test-key-1"
)

type secureBroker struct {
	*harness.Broker
	CA      string // PEM file of the CA that signed the broker's certificate
	key     *rsa.PrivateKey
	jwks    string
	tlsConf *tls.Config
}

func startSecure(t *testing.T, extra ...string) *secureBroker {
	t.Helper()
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	writeJWKS(t, jwks, &key.PublicKey, oauthKid)
	// --secure turns the authorizer on with admin as the super user;
	// these tests are about authentication, so every principal may do
	// what no ACL names (TestSecurePrincipalACLs checks principals
	// against ACLs).
	args := append([]string{"--secure", "--set", "allow.everyone.if.no.acl.found=true",
		"--set", "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,OAUTHBEARER",
		"--set", "sasl.oauthbearer.jwks.endpoint.url=file://" + jwks,
		"--set", "sasl.oauthbearer.expected.audience=" + oauthAudience,
		"--set", "sasl.oauthbearer.expected.issuer=" + oauthIssuer,
	}, extra...)
	b := harness.Start(t, harness.Options{ExtraArgs: args, Env: []string{"SLUICE_BOOTSTRAP_USER=" + secureAdmin + ":" + secureAdminPass}})
	ca := filepath.Join(b.DataDir, "tls", "ca.crt")
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatalf("sluice dev --secure wrote no CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", ca)
	}
	return &secureBroker{Broker: b, CA: ca, key: key, jwks: jwks, tlsConf: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
}

func writeJWKS(t *testing.T, path string, pub *rsa.PublicKey, kid string) {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	set := map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}}
	js, _ := json.Marshal(set)
	if err := os.WriteFile(path, js, 0o644); err != nil {
		t.Fatal(err)
	}
}

// token signs an RS256 JWT for sub with the test's key; edit changes the
// claims before signing.
func (sb *secureBroker) token(t *testing.T, sub string, edit func(map[string]any)) string {
	t.Helper()
	now := time.Now()
	claims := map[string]any{"sub": sub, "iss": oauthIssuer, "aud": oauthAudience,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "scope": "kafka"}
	if edit != nil {
		edit(claims)
	}
	return signJWT(t, sb.key, oauthKid, claims)
}

func signJWT(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	body, _ := json.Marshal(claims)
	signed := base64.RawURLEncoding.EncodeToString(hdr) + "." + base64.RawURLEncoding.EncodeToString(body)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func (sb *secureBroker) client(t *testing.T, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sb.KafkaAddr), kgo.DialTLSConfig(sb.tlsConf.Clone()), kgo.SASL(m), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// roundTripRecord produces one record to topic and reads it back.
func roundTripRecord(t *testing.T, cl *kgo.Client, topic, value string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		return err
	}
	cl.AddConsumeTopics(topic)
	var lastErr error
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		// Fetch errors are retried (a topic auto-created by the produce
		// may not be in the consumer's metadata yet).
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				lastErr = err
			}
		})
		found := false
		fs.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == value })
		if found {
			return nil
		}
	}
	return fmt.Errorf("record not read back: %v (last fetch error: %v)", ctx.Err(), lastErr)
}

func scramAuth(user, pass string, sha512 bool) sasl.Mechanism {
	a := scram.Auth{User: user, Pass: pass}
	if sha512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

// TestSecureFranzGo: franz-go over SASL_SSL with each mechanism, admin
// management of SCRAM users (AlterUserScramCredentials,
// DescribeUserScramCredentials), and refusals of bad credentials.
func TestSecureFranzGo(t *testing.T) {
	t.Parallel()
	sb := startSecure(t)
	t.Run("scram-sha-256", func(t *testing.T) {
		if err := roundTripRecord(t, sb.client(t, scramAuth(secureAdmin, secureAdminPass, false)), "sec-scram256", "v256"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("scram-sha-512", func(t *testing.T) {
		if err := roundTripRecord(t, sb.client(t, scramAuth(secureAdmin, secureAdminPass, true)), "sec-scram512", "v512"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("plain", func(t *testing.T) {
		m := plain.Auth{User: secureAdmin, Pass: secureAdminPass}.AsMechanism()
		if err := roundTripRecord(t, sb.client(t, m), "sec-plain", "vplain"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("oauthbearer", func(t *testing.T) {
		m := oauth.Auth{Token: sb.token(t, "svc-orders", nil)}.AsMechanism()
		if err := roundTripRecord(t, sb.client(t, m), "sec-oauth", "voauth"); err != nil {
			t.Fatal(err)
		}
	})
	// Each refusal is SASL_AUTHENTICATION_FAILED.
	refused := map[string]sasl.Mechanism{
		"scram wrong password":   scramAuth(secureAdmin, "wrong", true),
		"scram unknown user":     scramAuth("nobody", secureAdminPass, false),
		"plain wrong password":   plain.Auth{User: secureAdmin, Pass: "wrong"}.AsMechanism(),
		"oauth wrong audience":   oauth.Auth{Token: sb.token(t, "svc", func(c map[string]any) { c["aud"] = "other" })}.AsMechanism(),
		"oauth wrong issuer":     oauth.Auth{Token: sb.token(t, "svc", func(c map[string]any) { c["iss"] = "https://evil.test" })}.AsMechanism(),
		"oauth expired":          oauth.Auth{Token: sb.token(t, "svc", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Hour).Unix() })}.AsMechanism(),
		"oauth not yet valid":    oauth.Auth{Token: sb.token(t, "svc", func(c map[string]any) { c["nbf"] = time.Now().Add(time.Hour).Unix() })}.AsMechanism(),
		"oauth no subject":       oauth.Auth{Token: sb.token(t, "svc", func(c map[string]any) { delete(c, "sub") })}.AsMechanism(),
		"oauth unsecured (none)": oauth.Auth{Token: unsecuredJWT("svc")}.AsMechanism(),
		"oauth foreign key":      oauth.Auth{Token: foreignToken(t)}.AsMechanism(),
	}
	for name, m := range refused {
		t.Run("refused/"+name, func(t *testing.T) {
			cl := sb.client(t, m)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			err := cl.Ping(ctx)
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("ping: %v, want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
	t.Run("scram users admin", func(t *testing.T) {
		admCl := sb.client(t, scramAuth(secureAdmin, secureAdminPass, true))
		adm := kadm.NewClient(admCl)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
			{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-pw"},
			{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-pw"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res["alice"].Err != nil {
			t.Fatalf("alter alice: %v", res["alice"].Err)
		}
		// What kadm refuses before sending, by hand: too few iterations,
		// an unknown mechanism, a (user, mechanism) twice.
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		up := func(user string, mech int8, iter int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
			u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, mech, iter, []byte("salt"), make([]byte, 32)
			return u
		}
		req.Upsertions = append(req.Upsertions, up("bob", 1, 1000), up("dave", 3, 4096), up("erin", 1, 4096), up("erin", 1, 4096))
		kr, err := req.RequestWith(ctx, admCl)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int16{"bob": kerr.UnacceptableCredential.Code, "dave": kerr.UnsupportedSaslMechanism.Code, "erin": kerr.DuplicateResource.Code}
		for _, r := range kr.Results {
			if r.ErrorCode != want[r.User] {
				t.Errorf("alter %s: %v, want %v", r.User, kerr.ErrorForCode(r.ErrorCode), kerr.ErrorForCode(want[r.User]))
			}
		}
		if len(kr.Results) != 3 {
			t.Errorf("alter: %d results, want 3", len(kr.Results))
		}
		d, err := adm.DescribeUserSCRAMs(ctx, "alice", "bob")
		if err != nil {
			t.Fatal(err)
		}
		if a := d["alice"]; a.Err != nil || len(a.CredInfos) != 2 || a.CredInfos[1].Iterations != 8192 {
			t.Fatalf("describe alice: %+v", a)
		}
		if !errors.Is(d["bob"].Err, kerr.ResourceNotFound) {
			t.Fatalf("describe bob: %v, want RESOURCE_NOT_FOUND", d["bob"].Err)
		}
		if err := roundTripRecord(t, sb.client(t, scramAuth("alice", "alice-pw", true)), "sec-alice", "va"); err != nil {
			t.Fatalf("alice after creation: %v", err)
		}
		res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}, {User: "carol", Mechanism: kadm.ScramSha256}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res["alice"].Err != nil || !errors.Is(res["carol"].Err, kerr.ResourceNotFound) {
			t.Fatalf("delete: alice %v, carol %v (want RESOURCE_NOT_FOUND)", res["alice"].Err, res["carol"].Err)
		}
		cl := sb.client(t, scramAuth("alice", "alice-pw", true))
		if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("alice's deleted SCRAM-SHA-512: %v, want SASL_AUTHENTICATION_FAILED", err)
		}
		if err := sb.client(t, scramAuth("alice", "alice-pw", false)).Ping(ctx); err != nil {
			t.Fatalf("alice's SCRAM-SHA-256 after deleting -512: %v", err)
		}
	})
}

func unsecuredJWT(sub string) string {
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`))
	body, _ := json.Marshal(map[string]any{"sub": sub, "iss": oauthIssuer, "aud": oauthAudience, "exp": time.Now().Add(time.Hour).Unix()})
	return hdr + "." + base64.RawURLEncoding.EncodeToString(body) + "."
}

func foreignToken(t *testing.T) string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return signJWT(t, k, oauthKid, map[string]any{"sub": "mallory", "iss": oauthIssuer, "aud": oauthAudience, "exp": time.Now().Add(time.Hour).Unix()})
}

// dialSecureRaw opens a TLS connection for hand-made requests.
func (sb *secureBroker) dialRaw(t *testing.T) *rawConn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", sb.KafkaAddr, sb.tlsConf.Clone())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, conn: c}
}

func (c *rawConn) saslHandshake(mech string) *kmsg.SASLHandshakeResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = 1, mech
	resp, err := c.roundTrip(req, 1)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.(*kmsg.SASLHandshakeResponse)
}

func (c *rawConn) saslAuthenticate(v int16, msg []byte) *kmsg.SASLAuthenticateResponse {
	c.t.Helper()
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = v, msg
	resp, err := c.roundTrip(req, v)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.(*kmsg.SASLAuthenticateResponse)
}

// TestSecureProtocol checks the SASL state machine on the wire, as Kafka's
// SaslServerAuthenticator behaves: what is closed, what is answered.
func TestSecureProtocol(t *testing.T) {
	t.Parallel()
	sb := startSecure(t, "--set", "connections.max.reauth.ms=1500")
	t.Run("request before authentication closes", func(t *testing.T) {
		c := sb.dialRaw(t)
		c.send(kmsg.NewPtrMetadataRequest())
		c.expectClosed(5 * time.Second)
	})
	t.Run("ApiVersions then unknown mechanism", func(t *testing.T) {
		c := sb.dialRaw(t)
		if len(c.apiVersions()) == 0 {
			t.Fatal("no ApiVersions before authentication")
		}
		r := c.saslHandshake("GSSAPI")
		if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || !strings.Contains(strings.Join(r.SupportedMechanisms, ","), "SCRAM-SHA-512") {
			t.Fatalf("handshake GSSAPI: %+v", r)
		}
		c.expectClosed(5 * time.Second)
	})
	t.Run("wrong password: SASL_AUTHENTICATION_FAILED, then closed", func(t *testing.T) {
		c := sb.dialRaw(t)
		if r := c.saslHandshake("PLAIN"); r.ErrorCode != 0 {
			t.Fatalf("handshake PLAIN: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		r := c.saslAuthenticate(2, []byte("\x00"+secureAdmin+"\x00nope"))
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil {
			t.Fatalf("authenticate: %+v", r)
		}
		c.expectClosed(5 * time.Second)
	})
	t.Run("SaslHandshake v0: bare token frames", func(t *testing.T) {
		c := sb.dialRaw(t)
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 0, "PLAIN"
		if r, err := c.roundTrip(req, 0); err != nil || r.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
			t.Fatalf("handshake v0: %v %+v", err, r)
		}
		token := []byte("\x00" + secureAdmin + "\x00" + secureAdminPass)
		if err := c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...)); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c.conn, size[:]); err != nil || binary.BigEndian.Uint32(size[:]) != 0 {
			t.Fatalf("PLAIN over v0: answer % x, %v (want an empty token)", size, err)
		}
		if _, err := c.roundTrip(kmsg.NewPtrMetadataRequest(), 0); err != nil {
			t.Fatalf("metadata after v0 authentication: %v", err)
		}
		// A wrong password over v0 has no error to carry: closed.
		c = sb.dialRaw(t)
		if r, err := c.roundTrip(req, 0); err != nil || r.(*kmsg.SASLHandshakeResponse).ErrorCode != 0 {
			t.Fatalf("handshake v0: %v %+v", err, r)
		}
		token = []byte("\x00" + secureAdmin + "\x00wrong")
		if err := c.write(append(binary.BigEndian.AppendUint32(nil, uint32(len(token))), token...)); err != nil {
			t.Fatal(err)
		}
		c.expectClosed(5 * time.Second)
	})
	t.Run("session lifetime and expiry", func(t *testing.T) {
		c := sb.dialRaw(t)
		c.saslHandshake("PLAIN")
		r := c.saslAuthenticate(1, []byte("\x00"+secureAdmin+"\x00"+secureAdminPass))
		if r.ErrorCode != 0 || r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > 1500 {
			t.Fatalf("authenticate: error %v, session lifetime %d ms (want 1..1500)", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis)
		}
		if _, err := c.roundTrip(kmsg.NewPtrMetadataRequest(), 0); err != nil {
			t.Fatalf("metadata while the session lasts: %v", err)
		}
		// Re-authentication (KIP-368) on the same connection renews it.
		time.Sleep(time.Second)
		if hr := c.saslHandshake("PLAIN"); hr.ErrorCode != 0 {
			t.Fatalf("re-authentication handshake: %v", kerr.ErrorForCode(hr.ErrorCode))
		}
		if r := c.saslAuthenticate(1, []byte("\x00"+secureAdmin+"\x00"+secureAdminPass)); r.ErrorCode != 0 {
			t.Fatalf("re-authentication: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		time.Sleep(time.Second)
		if _, err := c.roundTrip(kmsg.NewPtrMetadataRequest(), 0); err != nil {
			t.Fatalf("metadata after re-authentication: %v", err)
		}
		// Lapsed without re-authentication: the next request closes it.
		time.Sleep(1600 * time.Millisecond)
		c.send(kmsg.NewPtrMetadataRequest())
		c.expectClosed(5 * time.Second)
	})
	t.Run("re-authentication keeps the principal and the mechanism", func(t *testing.T) {
		bearer := func(sub string) []byte {
			return []byte("n,,\x01auth=Bearer " + sb.token(t, sub, nil) + "\x01\x01")
		}
		// Another principal: SASL_AUTHENTICATION_FAILED, then closed.
		c := sb.dialRaw(t)
		c.saslHandshake("OAUTHBEARER")
		if r := c.saslAuthenticate(1, bearer("reauth-alice")); r.ErrorCode != 0 {
			t.Fatalf("authenticate as reauth-alice: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		if hr := c.saslHandshake("OAUTHBEARER"); hr.ErrorCode != 0 {
			t.Fatalf("re-authentication handshake: %v", kerr.ErrorForCode(hr.ErrorCode))
		}
		r := c.saslAuthenticate(1, bearer("reauth-bob"))
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil ||
			!strings.Contains(*r.ErrorMessage, "from User:reauth-alice to User:reauth-bob") {
			t.Fatalf("re-authentication as reauth-bob: %+v (want SASL_AUTHENTICATION_FAILED naming both principals)", r)
		}
		c.expectClosed(5 * time.Second)
		// The same principal again: renewed.
		c = sb.dialRaw(t)
		c.saslHandshake("OAUTHBEARER")
		c.saslAuthenticate(1, bearer("reauth-alice"))
		c.saslHandshake("OAUTHBEARER")
		if r := c.saslAuthenticate(1, bearer("reauth-alice")); r.ErrorCode != 0 {
			t.Fatalf("re-authentication as reauth-alice: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		if _, err := c.roundTrip(kmsg.NewPtrMetadataRequest(), 0); err != nil {
			t.Fatalf("metadata after re-authentication: %v", err)
		}
		// Another mechanism: UNSUPPORTED_SASL_MECHANISM, then closed.
		c = sb.dialRaw(t)
		c.saslHandshake("PLAIN")
		if r := c.saslAuthenticate(1, []byte("\x00"+secureAdmin+"\x00"+secureAdminPass)); r.ErrorCode != 0 {
			t.Fatalf("authenticate: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		if hr := c.saslHandshake("SCRAM-SHA-256"); hr.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
			t.Fatalf("re-authentication handshake with SCRAM-SHA-256 after PLAIN: %v (want UNSUPPORTED_SASL_MECHANISM)", kerr.ErrorForCode(hr.ErrorCode))
		}
		c.expectClosed(5 * time.Second)
	})
	t.Run("franz-go re-authenticates", func(t *testing.T) {
		cl := sb.client(t, scramAuth(secureAdmin, secureAdminPass, false))
		deadline := time.Now().Add(4 * time.Second)
		for i := 0; time.Now().Before(deadline); i++ {
			if err := roundTripRecord(t, cl, "sec-reauth", "r"+itoa(i)); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
			time.Sleep(300 * time.Millisecond)
		}
	})
}

// TestSecurePrincipalACLs: the authenticated principal is what the
// authorizer sees. `sluice dev --secure` turns it on with the bootstrap
// user as super user; an OAUTHBEARER subject with an ACL on a topic
// writes to it, another subject without one is refused; a SCRAM user
// reads only once it may READ its group too.
func TestSecurePrincipalACLs(t *testing.T) {
	t.Parallel()
	sb := startSecure(t, "--set", "allow.everyone.if.no.acl.found=false")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(sb.client(t, scramAuth(secureAdmin, secureAdminPass, true)))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "acl-orders"); err != nil {
		t.Fatalf("the super user creates a topic: %v", err)
	}
	b := kadm.NewACLs().Allow("User:svc-orders").Topics("acl-orders").
		Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := adm.CreateACLs(ctx, b)
	if err != nil || len(res) != 2 {
		t.Fatalf("CreateACLs: %v %+v", err, res)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs %v: %v", r.Operation, r.Err)
		}
	}
	produce := func(sub string) error {
		cl := sb.client(t, oauth.Auth{Token: sb.token(t, sub, nil)}.AsMechanism())
		pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
		defer pcancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: "acl-orders", Value: []byte(sub)}).FirstErr()
	}
	if err := produce("svc-orders"); err != nil {
		t.Fatalf("User:svc-orders with WRITE on acl-orders: %v", err)
	}
	if err := produce("svc-other"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("User:svc-other without an ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// A SCRAM user with READ on the topic but no ACL on its group: a
	// group consumer gets GROUP_AUTHORIZATION_FAILED, and is served once
	// READ on the group is granted.
	up, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "reader", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "reader-pw"}})
	if err != nil || up["reader"].Err != nil {
		t.Fatalf("creating User:reader: %v %v", err, up)
	}
	if res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:reader").Topics("acl-orders").Operations(kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("READ on acl-orders for User:reader: %v %+v", err, res)
	}
	consume := func() error {
		cl := sb.client(t, scramAuth("reader", "reader-pw", true), kgo.ConsumeTopics("acl-orders"), kgo.ConsumerGroup("acl-readers"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer cl.Close()
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			fs := cl.PollFetches(pctx)
			pcancel()
			if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			if fs.NumRecords() > 0 {
				return nil
			}
		}
		return ctx.Err()
	}
	if err := consume(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("User:reader's group consumer without READ on the group: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	if res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:reader").Groups("acl-readers").Operations(kadm.OpRead)); err != nil || res[0].Err != nil {
		t.Fatalf("READ on acl-readers for User:reader: %v %+v", err, res)
	}
	if err := consume(); err != nil {
		t.Fatalf("User:reader's group consumer with READ on the group and the topic: %v", err)
	}
}
