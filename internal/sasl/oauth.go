package sasl

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// OAuthConfig is Kafka's broker-side OAUTHBEARER validation settings.
type OAuthConfig struct {
	// JWKSURL is sasl.oauthbearer.jwks.endpoint.url: an http(s) URL or a
	// file: URL of a JSON Web Key Set.
	JWKSURL string
	// JWKSRefresh is sasl.oauthbearer.jwks.endpoint.refresh.ms: how often
	// the key set is fetched again (a key id not in the set fetches it at
	// once, at most every JWKSRetryBackoff).
	JWKSRefresh time.Duration
	// JWKSRetryBackoff and JWKSRetryBackoffMax are
	// sasl.oauthbearer.jwks.endpoint.retry.backoff.ms and .max.ms: a
	// failed fetch is retried after JWKSRetryBackoff, doubling, until
	// JWKSRetryBackoffMax has passed since the first attempt (Kafka's
	// Retry).
	JWKSRetryBackoff    time.Duration
	JWKSRetryBackoffMax time.Duration
	// ExpectedAudience (sasl.oauthbearer.expected.audience): when set, the
	// token's aud must name one of them.
	ExpectedAudience []string
	// ExpectedIssuer (sasl.oauthbearer.expected.issuer): when set, iss must
	// equal it.
	ExpectedIssuer string
	// ScopeClaimName and SubClaimName (sasl.oauthbearer.scope.claim.name,
	// .sub.claim.name): default "scope" and "sub".
	ScopeClaimName string
	SubClaimName   string
	// ClockSkew is sasl.oauthbearer.clock.skew.seconds (default 30 s).
	ClockSkew time.Duration
	// HTTPClient fetches an http(s) JWKS; nil: a client with a 10 s
	// timeout.
	HTTPClient *http.Client
}

// Token is a validated access token.
type Token struct {
	Principal string
	Scope     []string
	Expiry    time.Time
	IssuedAt  time.Time
}

// Validator checks OAUTHBEARER tokens (JWS compact serialization, RS256,
// RS384, RS512, ES256, ES384) against a JWKS. It is safe for concurrent
// use.
type Validator struct {
	cfg OAuthConfig
	now func() time.Time

	mu        sync.Mutex
	keys      map[string]crypto.PublicKey // by kid
	anonymous []crypto.PublicKey          // keys without a kid
	fetched   time.Time
	fileStamp time.Time
	lastErr   error
	// inflight is closed when the fetch under way ends: concurrent
	// authentications share one fetch (Kafka's refreshInProgressFlag).
	inflight chan struct{}
	// missing is Kafka's missing key id cache: a key id no key of the set
	// carries, and when it may next cause a fetch. At most
	// missingKeyIDMaxEntries ids, the least recently asked dropped first.
	missing map[string]missingKeyID
	// fetches counts fetches of the set (tests).
	fetches int
}

// Kafka's RefreshingHttpsJwks limits on fetching the set for an unknown
// key id: once per id per minute, at most 16 ids remembered, and an id
// longer than 1000 characters never causes a fetch.
const (
	missingKeyIDInFlight   = time.Minute
	missingKeyIDMaxEntries = 16
	missingKeyIDMaxLength  = 1000
)

type missingKeyID struct {
	nextCheck time.Time
	used      time.Time
}

// NewValidator checks cfg and fetches the key set once: a broker with a
// JWKS it cannot read does not start.
func NewValidator(cfg OAuthConfig) (*Validator, error) {
	if cfg.JWKSURL == "" {
		return nil, errors.New("OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (unsecured tokens are not accepted)")
	}
	u, err := url.Parse(cfg.JWKSURL)
	if err != nil || (u.Scheme != "file" && u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %q: want an http(s) or file: URL", cfg.JWKSURL)
	}
	if cfg.ScopeClaimName == "" {
		cfg.ScopeClaimName = "scope"
	}
	if cfg.SubClaimName == "" {
		cfg.SubClaimName = "sub"
	}
	if cfg.JWKSRefresh <= 0 {
		cfg.JWKSRefresh = time.Hour
	}
	if cfg.JWKSRetryBackoff <= 0 {
		cfg.JWKSRetryBackoff = 100 * time.Millisecond
	}
	if cfg.JWKSRetryBackoffMax <= 0 {
		cfg.JWKSRetryBackoffMax = 10 * time.Second
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	v := &Validator{cfg: cfg, now: time.Now, missing: map[string]missingKeyID{}}
	if err := v.refresh(context.Background()); err != nil {
		return nil, err
	}
	return v, nil
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (v *Validator) readJWKS(ctx context.Context) ([]byte, time.Time, error) {
	u, _ := url.Parse(v.cfg.JWKSURL)
	if u.Scheme == "file" {
		p := u.Path
		if p == "" {
			p = u.Opaque
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, time.Time{}, err
		}
		b, err := os.ReadFile(p)
		return b, fi.ModTime(), err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, time.Time{}, fmt.Errorf("JWKS endpoint answered %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return b, time.Time{}, err
}

func (v *Validator) refresh(ctx context.Context) error {
	b, stamp, err := v.readJWKS(ctx)
	if err == nil {
		var set struct {
			Keys []jwk `json:"keys"`
		}
		if err = json.Unmarshal(b, &set); err == nil {
			keys := map[string]crypto.PublicKey{}
			var anon []crypto.PublicKey
			for _, k := range set.Keys {
				if k.Use != "" && k.Use != "sig" {
					continue
				}
				pk, kerr := k.publicKey()
				if kerr != nil {
					continue // keys of other types are not ours to use
				}
				if k.Kid == "" {
					anon = append(anon, pk)
				} else {
					keys[k.Kid] = pk
				}
			}
			if len(keys)+len(anon) == 0 {
				err = errors.New("JWKS holds no RSA or EC signing key")
			} else {
				v.mu.Lock()
				v.keys, v.anonymous, v.fileStamp, v.lastErr = keys, anon, stamp, nil
				v.fetched = v.now()
				v.fetches++
				for kid := range keys {
					delete(v.missing, kid)
				}
				v.mu.Unlock()
				return nil
			}
		}
	}
	err = fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url %s: %w", v.cfg.JWKSURL, err)
	v.mu.Lock()
	v.lastErr = err
	v.fetched = v.now()
	v.fetches++
	v.mu.Unlock()
	return err
}

// fetch refreshes the set once, shared: a caller that finds a fetch under
// way waits for it instead of starting another. A failed attempt is
// retried with Kafka's backoff (JWKSRetryBackoff doubling, for at most
// JWKSRetryBackoffMax); when every attempt failed the keys held stay in
// use.
func (v *Validator) fetch() {
	v.mu.Lock()
	if ch := v.inflight; ch != nil {
		v.mu.Unlock()
		<-ch
		return
	}
	ch := make(chan struct{})
	v.inflight = ch
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		v.inflight = nil
		v.mu.Unlock()
		close(ch)
	}()
	end := time.Now().Add(v.cfg.JWKSRetryBackoffMax)
	wait := v.cfg.JWKSRetryBackoff
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := v.refresh(ctx)
		cancel()
		if err == nil {
			return
		}
		left := time.Until(end)
		if left <= 0 {
			return
		}
		time.Sleep(min(wait, left))
		wait *= 2
	}
}

// expedite is Kafka's maybeExpediteRefresh: whether an unknown key id may
// cause a fetch now. Each id may once a minute; an id too long to be real
// never does.
func (v *Validator) expedite(kid string) bool {
	if kid == "" || len(kid) > missingKeyIDMaxLength {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.now()
	if m, ok := v.missing[kid]; ok && now.Before(m.nextCheck) {
		m.used = now
		v.missing[kid] = m
		return false
	}
	v.missing[kid] = missingKeyID{nextCheck: now.Add(missingKeyIDInFlight), used: now}
	for len(v.missing) > missingKeyIDMaxEntries {
		oldest := ""
		for id, m := range v.missing {
			if oldest == "" || m.used.Before(v.missing[oldest].used) {
				oldest = id
			}
		}
		delete(v.missing, oldest)
	}
	return true
}

func (k jwk) publicKey() (crypto.PublicKey, error) {
	dec := base64.RawURLEncoding.DecodeString
	switch k.Kty {
	case "RSA":
		n, err1 := dec(k.N)
		e, err2 := dec(k.E)
		if err1 != nil || err2 != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return nil, errors.New("bad RSA key")
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		default:
			return nil, errors.New("unsupported curve")
		}
		x, err1 := dec(k.X)
		y, err2 := dec(k.Y)
		if err1 != nil || err2 != nil {
			return nil, errors.New("bad EC key")
		}
		size := (curve.Params().BitSize + 7) / 8
		raw := append([]byte{4}, append(leftPad(x, size), leftPad(y, size)...)...)
		pk, err := ecdsa.ParseUncompressedPublicKey(curve, raw)
		if err != nil {
			return nil, err
		}
		return pk, nil
	}
	return nil, errors.New("unsupported key type")
}

func leftPad(b []byte, n int) []byte {
	if len(b) >= n {
		return b
	}
	return append(make([]byte, n-len(b)), b...)
}

// key finds the verification key for kid. The set is fetched again
// first when sasl.oauthbearer.jwks.endpoint.refresh.ms has passed since
// the last fetch, or when a file: set changed; and, as Kafka's
// RefreshingHttpsJwks does, when kid is not in the set and expedite allows
// it (once per id per minute). Unlike Kafka, which fails the
// authentication that asked and lets the client retry, the authentication
// waits for that fetch and uses the keys it brought.
func (v *Validator) key(kid string) (crypto.PublicKey, []crypto.PublicKey) {
	v.mu.Lock()
	age := v.now().Sub(v.fetched)
	v.mu.Unlock()
	stale := age >= v.cfg.JWKSRefresh
	if !stale && strings.HasPrefix(v.cfg.JWKSURL, "file:") && age >= time.Second {
		u, _ := url.Parse(v.cfg.JWKSURL)
		if fi, err := os.Stat(u.Path); err == nil {
			v.mu.Lock()
			stale = !fi.ModTime().Equal(v.fileStamp)
			v.mu.Unlock()
		}
	}
	if stale {
		v.fetch()
	}
	v.mu.Lock()
	pk, ok := v.keys[kid]
	v.mu.Unlock()
	if kid != "" {
		if !ok && v.expedite(kid) {
			v.fetch()
			v.mu.Lock()
			pk, ok = v.keys[kid]
			v.mu.Unlock()
		}
		if ok {
			return pk, nil
		}
		return nil, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	all := append([]crypto.PublicKey(nil), v.anonymous...)
	for _, k := range v.keys {
		all = append(all, k)
	}
	return nil, all
}

// Validate checks a compact JWS: signature by a key of the set, exp (with
// clock skew), nbf and iat not in the future, iss and aud when expected,
// the scope claim's form, and a non-empty subject claim, which becomes the
// principal.
func (v *Validator) Validate(token string) (Token, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Token{}, errors.New("malformed JWT: want three dot-separated parts")
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return Token{}, errors.New("malformed JWT header")
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(hb, &hdr); err != nil {
		return Token{}, errors.New("malformed JWT header")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) == 0 {
		return Token{}, errors.New("malformed JWT signature")
	}
	signed := []byte(parts[0] + "." + parts[1])
	pk, candidates := v.key(hdr.Kid)
	if pk == nil && len(candidates) == 0 {
		return Token{}, fmt.Errorf("no key in the JWKS for kid %q", hdr.Kid)
	}
	if pk != nil {
		candidates = []crypto.PublicKey{pk}
	}
	verified := false
	for _, k := range candidates {
		if err := verifySig(hdr.Alg, k, signed, sig); err == nil {
			verified = true
			break
		} else if errors.Is(err, errUnsupportedAlg) {
			return Token{}, err
		}
	}
	if !verified {
		return Token{}, errors.New("JWT signature does not verify")
	}
	pb, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Token{}, errors.New("malformed JWT payload")
	}
	var claims map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(pb))
	d.UseNumber()
	if err := d.Decode(&claims); err != nil {
		return Token{}, errors.New("malformed JWT payload")
	}
	now := v.now()
	skew := v.cfg.ClockSkew
	exp, ok, err := numericDate(claims, "exp")
	if err != nil || !ok {
		return Token{}, errors.New("JWT has no valid exp claim")
	}
	if !now.Before(exp.Add(skew)) {
		return Token{}, fmt.Errorf("JWT expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if nbf, ok, err := numericDate(claims, "nbf"); err != nil {
		return Token{}, err
	} else if ok && now.Add(skew).Before(nbf) {
		return Token{}, errors.New("JWT is not valid yet (nbf)")
	}
	iat, ok, err := numericDate(claims, "iat")
	if err != nil {
		return Token{}, err
	}
	if ok && now.Add(skew).Before(iat) {
		return Token{}, errors.New("JWT issued in the future (iat)")
	}
	if v.cfg.ExpectedIssuer != "" {
		var iss string
		if json.Unmarshal(claims["iss"], &iss) != nil || iss != v.cfg.ExpectedIssuer {
			return Token{}, errors.New("JWT iss is not the expected issuer")
		}
	}
	if len(v.cfg.ExpectedAudience) > 0 {
		auds, err := stringOrList(claims["aud"])
		if err != nil || !intersects(auds, v.cfg.ExpectedAudience) {
			return Token{}, errors.New("JWT aud does not name an expected audience")
		}
	}
	scope, err := stringOrList(claims[v.cfg.ScopeClaimName])
	if err != nil {
		return Token{}, fmt.Errorf("JWT claim %q is not a string or a list of strings", v.cfg.ScopeClaimName)
	}
	if len(scope) == 1 {
		scope = strings.Fields(scope[0])
	}
	var sub string
	if json.Unmarshal(claims[v.cfg.SubClaimName], &sub) != nil || strings.TrimSpace(sub) == "" {
		return Token{}, fmt.Errorf("JWT has no %q claim naming the principal", v.cfg.SubClaimName)
	}
	return Token{Principal: sub, Scope: scope, Expiry: exp, IssuedAt: iat}, nil
}

var errUnsupportedAlg = errors.New("JWT alg is not one of RS256, RS384, RS512, ES256, ES384")

func verifySig(alg string, key crypto.PublicKey, signed, sig []byte) error {
	var h crypto.Hash
	switch alg {
	case "RS256", "ES256":
		h = crypto.SHA256
	case "RS384", "ES384":
		h = crypto.SHA384
	case "RS512":
		h = crypto.SHA512
	default:
		return errUnsupportedAlg
	}
	var digest []byte
	switch h {
	case crypto.SHA256:
		s := sha256.Sum256(signed)
		digest = s[:]
	case crypto.SHA384:
		s := sha512.Sum384(signed)
		digest = s[:]
	case crypto.SHA512:
		s := sha512.Sum512(signed)
		digest = s[:]
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		if alg[0] != 'R' {
			return errors.New("key type does not match alg")
		}
		return rsa.VerifyPKCS1v15(k, h, digest, sig)
	case *ecdsa.PublicKey:
		if alg[0] != 'E' {
			return errors.New("key type does not match alg")
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return errors.New("bad ECDSA signature length")
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		if !ecdsa.Verify(k, digest, r, s) {
			return errors.New("bad ECDSA signature")
		}
		return nil
	}
	return errors.New("unsupported key")
}

func numericDate(claims map[string]json.RawMessage, name string) (time.Time, bool, error) {
	raw, ok := claims[name]
	if !ok {
		return time.Time{}, false, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return time.Time{}, false, fmt.Errorf("JWT claim %s is not a number", name)
	}
	f, err := n.Float64()
	if err != nil {
		return time.Time{}, false, fmt.Errorf("JWT claim %s is not a number", name)
	}
	return time.UnixMilli(int64(f * 1000)), true, nil
}

func stringOrList(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, err
	}
	return l, nil
}

func intersects(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

// oauthSession is RFC 7628's exchange as Kafka's OAuthBearerSaslServer runs
// it: the client's initial response carries the token; an invalid token is
// answered with an error status the client acknowledges with a lone 0x01,
// and only then does the exchange fail.
type oauthSession struct {
	v      *Validator
	tok    Token
	failed string
	done   bool
}

func (s *oauthSession) Principal() string { return s.tok.Principal }
func (s *oauthSession) Expiry() time.Time { return s.tok.Expiry }

func (s *oauthSession) Step(in []byte) ([]byte, bool, error) {
	if s.failed != "" {
		// The client's acknowledgement of the error status (0x01).
		return nil, false, fail(s.failed)
	}
	if s.done {
		return nil, false, fail("Authentication failed: unexpected OAUTHBEARER message after the exchange ended")
	}
	s.done = true
	token, authzid, err := parseOAuthInitial(in)
	if err != nil {
		return nil, false, fail("Authentication failed: " + err.Error())
	}
	tok, err := s.v.Validate(token)
	if err != nil {
		body, _ := json.Marshal(map[string]string{"status": "invalid_token"})
		s.failed = "Authentication failed: " + err.Error()
		return body, false, nil
	}
	if authzid != "" && authzid != tok.Principal {
		return nil, false, fail("Authentication failed: Authorization ID (" + authzid + ") does not match the principal of the token")
	}
	s.tok = tok
	return nil, true, nil
}

// parseOAuthInitial reads "n,[a=authzid],\x01auth=Bearer <token>\x01
// [key=value\x01]*\x01".
func parseOAuthInitial(in []byte) (token, authzid string, err error) {
	msg := string(in)
	cbind, rest, ok := strings.Cut(msg, ",")
	if !ok || (cbind != "n" && cbind != "y") {
		return "", "", errors.New("invalid OAUTHBEARER initial response: bad GS2 header")
	}
	az, rest, ok := strings.Cut(rest, ",")
	if !ok {
		return "", "", errors.New("invalid OAUTHBEARER initial response: bad GS2 header")
	}
	if az != "" {
		if !strings.HasPrefix(az, "a=") {
			return "", "", errors.New("invalid OAUTHBEARER initial response: bad authzid")
		}
		authzid = az[2:]
	}
	if !strings.HasPrefix(rest, "\x01") || !strings.HasSuffix(rest, "\x01\x01") {
		return "", "", errors.New("invalid OAUTHBEARER initial response: bad key/value separators")
	}
	for _, kv := range strings.Split(strings.TrimSuffix(rest[1:], "\x01\x01"), "\x01") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return "", "", errors.New("invalid OAUTHBEARER initial response: bad key/value pair")
		}
		if k == "auth" {
			scheme, tok, ok := strings.Cut(val, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
				return "", "", errors.New("invalid OAUTHBEARER initial response: auth is not \"Bearer <token>\"")
			}
			token = strings.TrimSpace(tok)
		}
	}
	if token == "" {
		return "", "", errors.New("invalid OAUTHBEARER initial response: no auth value")
	}
	return token, authzid, nil
}
