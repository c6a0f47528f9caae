package configs

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/internal/sasl"
	"github.com/sluice-broker/sluice/internal/tlsconfig"
)

// Security protocols as Kafka names them.
const (
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// Security holds Kafka's ssl.* and sasl.* broker settings: the defaults of
// every listener, which `listener.name.<name>.<key>` overrides for one
// listener (Config.ListenerOverrides), as in Kafka.
type Security struct {
	// Keys are the ssl.* keys (PEM key and trust stores, ssl.client.auth,
	// protocols, cipher suites): tlsconfig's table, which the client
	// properties files of Sluice's own tools read too.
	tlsconfig.Keys `mapstructure:",squash"`

	// SASLEnabledMechanisms: comma-separated, of PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512 and OAUTHBEARER. Kafka's default is GSSAPI, which
	// Sluice does not serve; its default is the two SCRAM mechanisms.
	SASLEnabledMechanisms string `mapstructure:"sasl.enabled.mechanisms"`
	// SSLPrincipalMappingRules is Kafka's ssl.principal.mapping.rules: how
	// an SSL listener turns a client certificate's subject into the
	// principal's name (tlsconfig.PrincipalMapper); DEFAULT keeps the
	// subject as it is.
	SSLPrincipalMappingRules string `mapstructure:"ssl.principal.mapping.rules"`
	// OAUTHBEARER token validation (Kafka's names and defaults).
	SASLOAuthBearerJWKSEndpointURL          string `mapstructure:"sasl.oauthbearer.jwks.endpoint.url"`
	SASLOAuthBearerJWKSEndpointRefreshMs    int64  `mapstructure:"sasl.oauthbearer.jwks.endpoint.refresh.ms"`
	SASLOAuthBearerJWKSEndpointRetryBackoff int64  `mapstructure:"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"`
	SASLOAuthBearerJWKSEndpointRetryMax     int64  `mapstructure:"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"`
	SASLOAuthBearerExpectedAudience         string `mapstructure:"sasl.oauthbearer.expected.audience"`
	SASLOAuthBearerExpectedIssuer           string `mapstructure:"sasl.oauthbearer.expected.issuer"`
	SASLOAuthBearerScopeClaimName           string `mapstructure:"sasl.oauthbearer.scope.claim.name"`
	SASLOAuthBearerSubClaimName             string `mapstructure:"sasl.oauthbearer.sub.claim.name"`
	SASLOAuthBearerClockSkewSeconds         int64  `mapstructure:"sasl.oauthbearer.clock.skew.seconds"`
	// ConnectionsMaxReauthMs (KIP-368): a SASL session lasts at most this
	// long (an OAUTHBEARER session also no longer than its token); the
	// client must re-authenticate on the same connection before then, or
	// the connection is closed at its next request. 0: sessions do not
	// expire.
	ConnectionsMaxReauthMs int64 `mapstructure:"connections.max.reauth.ms"`

	// Inter-broker traffic (docs/security.md, "Between brokers"): the
	// requests a broker sends on to another broker over the Kafka
	// protocol (forwarded Produce, transaction markers, forwarded
	// ElectLeaders and DeleteRecords). InterBrokerListenerName is Kafka's
	// inter.broker.listener.name: the peer's listener of that name is
	// dialled; empty, the peer's first listener of the write or mixed view
	// (the view that serves its partitions' leadership). Either way the
	// protocol spoken is the one the peer registered for that listener.
	// SecurityInterBrokerProtocol is Kafka's security.inter.broker.protocol:
	// the listener named like the protocol (SSL, SASL_SSL, ...), as Kafka
	// reads it; only one of the two may be set.
	// SASLMechanismInterBrokerProtocol is the mechanism used on a SASL_*
	// listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default,
	// GSSAPI, is not served, so it must be set when the peer's listener is
	// SASL), with the credentials of
	// listener.name.<listener>.<mechanism>.sasl.jaas.config.
	InterBrokerListenerName          string `mapstructure:"inter.broker.listener.name"`
	SecurityInterBrokerProtocol      string `mapstructure:"security.inter.broker.protocol"`
	SASLMechanismInterBrokerProtocol string `mapstructure:"sasl.mechanism.inter.broker.protocol"`

	// BootstrapUser is "name:password" (usually from the environment,
	// SLUICE_BOOTSTRAP_USER, as Redpanda's RP_BOOTSTRAP_USER): at start,
	// if that user has no SCRAM credential yet, SCRAM-SHA-256 and
	// SCRAM-SHA-512 credentials are created for it, and the metastore
	// records it as a super user of every broker (besides super.users).
	// Sluice's own key.
	BootstrapUser string `mapstructure:"bootstrap.user"`
	// DevSecure is set by `sluice dev --secure` (not a config key).
	DevSecure bool `mapstructure:"-"`
}

// BootstrapCredentials splits bootstrap.user into name and password.
func (s Security) BootstrapCredentials() (user, password string, ok bool, err error) {
	if s.BootstrapUser == "" {
		return "", "", false, nil
	}
	user, password, found := strings.Cut(s.BootstrapUser, ":")
	if !found || user == "" || password == "" {
		return "", "", false, errors.New("bootstrap.user (SLUICE_BOOTSTRAP_USER) must be name:password")
	}
	return user, password, true, nil
}

// DefaultSecurity is Kafka's defaults, but for what Sluice does not serve
// (JKS stores, GSSAPI).
func DefaultSecurity() Security {
	return Security{
		Keys: tlsconfig.Keys{
			SSLKeystoreType:     "PEM",
			SSLTruststoreType:   "PEM",
			SSLClientAuth:       "none",
			SSLEnabledProtocols: "TLSv1.2,TLSv1.3",
		},
		SASLEnabledMechanisms:                   "SCRAM-SHA-256,SCRAM-SHA-512",
		SSLPrincipalMappingRules:                "DEFAULT",
		SASLOAuthBearerJWKSEndpointRefreshMs:    3600000,
		SASLOAuthBearerJWKSEndpointRetryBackoff: 100,
		SASLOAuthBearerJWKSEndpointRetryMax:     10000,
		SASLOAuthBearerScopeClaimName:           "scope",
		SASLOAuthBearerSubClaimName:             "sub",
		SASLOAuthBearerClockSkewSeconds:         30,
	}
}

// ListenerOverridePrefix starts Kafka's per-listener keys:
// listener.name.<listener name, lower case>.<key>.
const ListenerOverridePrefix = "listener.name."

// listenerKeys are the keys a listener may override, by their mapstructure
// name.
var listenerKeys = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range securityKeyNames() {
		if k != "connections.max.reauth.ms" {
			m[k] = true
		}
	}
	return m
}()

func securityKeyNames() []string {
	return append(tlsconfig.KeyNames(), "sasl.enabled.mechanisms", "ssl.principal.mapping.rules",
		"sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
		"sasl.oauthbearer.expected.audience",
		"sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
		"sasl.oauthbearer.clock.skew.seconds", "connections.max.reauth.ms")
}

// jaasMechanisms are the mechanisms a listener's
// listener.name.<name>.<mechanism>.sasl.jaas.config may name: the ones a
// broker can authenticate with to another broker.
var jaasMechanisms = []string{"plain", "scram-sha-256", "scram-sha-512"}

// jaasSuffix ends a listener's per-mechanism JAAS key.
const jaasSuffix = ".sasl.jaas.config"

// splitOverride splits "listener.name.<name>.[<mechanism>.]<key>" into
// the upper-cased listener name and the key. Kafka also prefixes a
// mechanism's own settings with the mechanism
// (listener.name.x.oauthbearer.sasl.oauthbearer.jwks.endpoint.url); that
// form is accepted for the OAUTHBEARER keys.
func splitOverride(full string) (listener, key string, ok bool) {
	rest, ok := strings.CutPrefix(strings.ToLower(full), ListenerOverridePrefix)
	if !ok {
		return "", "", false
	}
	name, key, ok := strings.Cut(rest, ".")
	if !ok || name == "" {
		return "", "", false
	}
	if k, mech := strings.CutPrefix(key, "oauthbearer."); mech && strings.HasPrefix(k, "sasl.oauthbearer.") {
		key = k
	}
	if mech, ok := strings.CutSuffix(key, jaasSuffix); ok && slices.Contains(jaasMechanisms, mech) {
		return strings.ToUpper(name), key, true
	}
	return strings.ToUpper(name), key, listenerKeys[key]
}

// CheckListenerOverride reports whether key is a listener-prefixed key
// Sluice knows (the config loader accepts only those).
func CheckListenerOverride(key string) error {
	if _, _, ok := splitOverride(key); !ok {
		return fmt.Errorf("unknown config key %q (a listener.name.<listener>. prefix takes one of: %s, <mechanism>%s)", key, strings.Join(sortedKeys(listenerKeys), ", "), jaasSuffix)
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ListenerSecurity is what one listener serves: its security protocol, its
// TLS settings (SSL, SASL_SSL) and its SASL settings (SASL_*).
type ListenerSecurity struct {
	Protocol   string
	TLS        tlsconfig.Options
	Mechanisms []string
	OAuth      sasl.OAuthConfig
	// MaxReauth is connections.max.reauth.ms (0: sessions never expire).
	MaxReauth time.Duration
	// PrincipalMapper is ssl.principal.mapping.rules, parsed: it names
	// the principal of a client certificate on an SSL listener.
	PrincipalMapper *tlsconfig.PrincipalMapper
	// JAAS holds listener.name.<name>.<mechanism>.sasl.jaas.config by
	// upper-case mechanism: the credentials this broker presents when it
	// dials another broker's listener of this name (InterBroker).
	JAAS map[string]string
}

// UsesTLS and UsesSASL say what the protocol asks for.
func (s ListenerSecurity) UsesTLS() bool {
	return s.Protocol == ProtocolSSL || s.Protocol == ProtocolSASLSSL
}
func (s ListenerSecurity) UsesSASL() bool {
	return s.Protocol == ProtocolSASLPlaintext || s.Protocol == ProtocolSASLSSL
}

// ListenerSecurity resolves listener name's settings: the broker-wide
// Security with the listener's listener.name.<name>.* overrides on top.
func (c Config) ListenerSecurity(l Listener) (ListenerSecurity, error) {
	s := c.Security
	name := strings.ToUpper(l.Name)
	var errs []error
	out := ListenerSecurity{Protocol: l.Protocol, MaxReauth: time.Duration(c.ConnectionsMaxReauthMs) * time.Millisecond}
	if out.Protocol == "" {
		out.Protocol = ProtocolPlaintext
	}
	keys := make([]string, 0, len(c.ListenerOverrides))
	for k := range c.ListenerOverrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, full := range keys {
		ln, key, ok := splitOverride(full)
		if !ok || ln != name {
			continue
		}
		if mech, ok := strings.CutSuffix(key, jaasSuffix); ok {
			if out.JAAS == nil {
				out.JAAS = map[string]string{}
			}
			out.JAAS[strings.ToUpper(mech)] = c.ListenerOverrides[full]
			continue
		}
		if err := s.set(key, c.ListenerOverrides[full]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", full, err))
		}
	}
	out.TLS = s.Keys.Options()
	pm, err := tlsconfig.ParsePrincipalMappingRules(s.SSLPrincipalMappingRules)
	if err != nil {
		errs = append(errs, fmt.Errorf("listener %s: ssl.principal.mapping.rules: %w", name, err))
	}
	out.PrincipalMapper = pm
	for _, m := range splitList(s.SASLEnabledMechanisms) {
		m = strings.ToUpper(m)
		if !sasl.Known(m) {
			errs = append(errs, fmt.Errorf("listener %s: sasl.enabled.mechanisms: %s is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)", name, m))
			continue
		}
		out.Mechanisms = append(out.Mechanisms, m)
	}
	out.OAuth = sasl.OAuthConfig{
		JWKSURL:             s.SASLOAuthBearerJWKSEndpointURL,
		JWKSRefresh:         time.Duration(s.SASLOAuthBearerJWKSEndpointRefreshMs) * time.Millisecond,
		JWKSRetryBackoff:    time.Duration(s.SASLOAuthBearerJWKSEndpointRetryBackoff) * time.Millisecond,
		JWKSRetryBackoffMax: time.Duration(s.SASLOAuthBearerJWKSEndpointRetryMax) * time.Millisecond,
		ExpectedAudience:    splitList(s.SASLOAuthBearerExpectedAudience),
		ExpectedIssuer:      s.SASLOAuthBearerExpectedIssuer,
		ScopeClaimName:      s.SASLOAuthBearerScopeClaimName,
		SubClaimName:        s.SASLOAuthBearerSubClaimName,
		ClockSkew:           time.Duration(s.SASLOAuthBearerClockSkewSeconds) * time.Second,
	}
	if out.UsesTLS() {
		if err := out.TLS.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("listener %s (%s): %w", name, out.Protocol, err))
		}
	}
	if out.UsesSASL() {
		if len(out.Mechanisms) == 0 {
			errs = append(errs, fmt.Errorf("listener %s (%s): sasl.enabled.mechanisms is empty", name, out.Protocol))
		}
		for _, m := range out.Mechanisms {
			if m == sasl.OAuthBearer && out.OAuth.JWKSURL == "" {
				errs = append(errs, fmt.Errorf("listener %s: OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (unsecured tokens are not accepted)", name))
			}
		}
	}
	return out, errors.Join(errs...)
}

// set assigns one overridable key from its string form.
func (s *Security) set(key, val string) error {
	var n int64
	parseInt := func() error {
		_, err := fmt.Sscan(val, &n)
		return err
	}
	if s.Keys.Set(key, val) {
		return nil
	}
	switch key {
	case "sasl.enabled.mechanisms":
		s.SASLEnabledMechanisms = val
	case "ssl.principal.mapping.rules":
		s.SSLPrincipalMappingRules = val
	case "sasl.oauthbearer.jwks.endpoint.url":
		s.SASLOAuthBearerJWKSEndpointURL = val
	case "sasl.oauthbearer.expected.audience":
		s.SASLOAuthBearerExpectedAudience = val
	case "sasl.oauthbearer.expected.issuer":
		s.SASLOAuthBearerExpectedIssuer = val
	case "sasl.oauthbearer.scope.claim.name":
		s.SASLOAuthBearerScopeClaimName = val
	case "sasl.oauthbearer.sub.claim.name":
		s.SASLOAuthBearerSubClaimName = val
	case "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "sasl.oauthbearer.clock.skew.seconds":
		if err := parseInt(); err != nil {
			return fmt.Errorf("not an integer: %q", val)
		}
		switch key {
		case "sasl.oauthbearer.jwks.endpoint.refresh.ms":
			s.SASLOAuthBearerJWKSEndpointRefreshMs = n
		case "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":
			s.SASLOAuthBearerJWKSEndpointRetryBackoff = n
		case "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms":
			s.SASLOAuthBearerJWKSEndpointRetryMax = n
		default:
			s.SASLOAuthBearerClockSkewSeconds = n
		}
	default:
		return fmt.Errorf("not a per-listener key")
	}
	return nil
}

// validateSecurity checks every listener's resolved security settings
// (files are read later, when the listeners start).
func (c Config) validateSecurity() error {
	var errs []error
	for k := range c.ListenerOverrides {
		ln, _, ok := splitOverride(k)
		if !ok {
			errs = append(errs, CheckListenerOverride(k))
			continue
		}
		// The inter-broker listener's keys may be set on a broker that
		// does not serve it (a read broker dialling write brokers).
		found := strings.EqualFold(ln, c.InterBrokerListener())
		for _, l := range c.Listeners {
			found = found || strings.EqualFold(l.Name, ln)
		}
		if !found {
			errs = append(errs, fmt.Errorf("%s names listener %s, which is not a listener", k, ln))
		}
	}
	for _, l := range c.Listeners {
		if _, err := c.ListenerSecurity(l); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.validateInterBroker(); err != nil {
		errs = append(errs, err)
	}
	if _, _, _, err := c.BootstrapCredentials(); err != nil {
		errs = append(errs, err)
	}
	if c.ConnectionsMaxReauthMs < 0 {
		errs = append(errs, errors.New("connections.max.reauth.ms must not be negative"))
	}
	return errors.Join(errs...)
}

// InternalSecurity is how the replication port (replica.listen) and the
// metastore port (meta.listen, and a broker's connections to meta.addrs)
// are protected: mutual TLS with one key store and one trust store
// (internal.ssl.*, the PEM forms of Kafka's ssl.* keys), or, on a
// non-loopback address without it, an explicit internal.insecure=true.
// A broker's certificate names it by the DNS name broker-<node.id>
// (tlsconfig.NodeName), a metastore member's by meta-<meta.id>
// (tlsconfig.MetaName).
type InternalSecurity struct {
	InternalSSLKeystoreType       string `mapstructure:"internal.ssl.keystore.type"`
	InternalSSLKeystoreLocation   string `mapstructure:"internal.ssl.keystore.location"`
	InternalSSLKeyPassword        string `mapstructure:"internal.ssl.key.password"`
	InternalSSLTruststoreType     string `mapstructure:"internal.ssl.truststore.type"`
	InternalSSLTruststoreLocation string `mapstructure:"internal.ssl.truststore.location"`
	InternalSSLEnabledProtocols   string `mapstructure:"internal.ssl.enabled.protocols"`
	InternalSSLCipherSuites       string `mapstructure:"internal.ssl.cipher.suites"`
	// InternalInsecure accepts plaintext, unauthenticated internal traffic
	// on a non-loopback replica.listen or meta.listen (a private network
	// the operator vouches for).
	InternalInsecure bool `mapstructure:"internal.insecure"`
}

// InternalTLS returns the mutual TLS options of the internal ports, and
// false when internal.ssl.keystore.location is not set (plaintext).
func (c Config) InternalTLS() (tlsconfig.Options, bool) {
	s := c.InternalSecurity
	if s.InternalSSLKeystoreLocation == "" {
		return tlsconfig.Options{}, false
	}
	return tlsconfig.InternalOptions(tlsconfig.Options{
		KeystoreType:       s.InternalSSLKeystoreType,
		KeystoreLocation:   s.InternalSSLKeystoreLocation,
		KeyPassword:        s.InternalSSLKeyPassword,
		TruststoreType:     s.InternalSSLTruststoreType,
		TruststoreLocation: s.InternalSSLTruststoreLocation,
		EnabledProtocols:   splitList(s.InternalSSLEnabledProtocols),
		CipherSuites:       splitList(s.InternalSSLCipherSuites),
	}), true
}

// validateInternal checks the internal.ssl.* keys, and refuses a
// non-loopback internal address that would carry plaintext,
// unauthenticated traffic unless internal.insecure says so.
func (c Config) validateInternal() error {
	var errs []error
	o, tlsOn := c.InternalTLS()
	if tlsOn {
		if err := tlsconfig.ValidateInternal(o); err != nil {
			errs = append(errs, fmt.Errorf("internal.ssl.*: %w", err))
		}
	} else if c.InternalSSLTruststoreLocation != "" || c.InternalSSLKeyPassword != "" {
		errs = append(errs, errors.New("internal.ssl.*: internal.ssl.keystore.location is required with the other internal.ssl keys"))
	}
	if c.InternalInsecure {
		return errors.Join(errs...)
	}
	if c.ReplicaListen != "" && !tlsOn && !loopbackAddr(c.ReplicaListen) {
		errs = append(errs, fmt.Errorf("replica.listen %s is not a loopback address and the replication port has no TLS: any host that reaches it can pose as a broker. Set internal.ssl.keystore.location and internal.ssl.truststore.location (mutual TLS), or internal.insecure=true to accept plaintext on a private network", c.ReplicaListen))
	}
	if c.HasRole("meta") && c.MetaListen != "" && !tlsOn && !loopbackAddr(c.MetaListen) {
		errs = append(errs, fmt.Errorf("meta.listen %s is not a loopback address and the metastore port has no TLS: any host that reaches it can pose as a quorum member. Set internal.ssl.keystore.location and internal.ssl.truststore.location (mutual TLS), or internal.insecure=true to accept plaintext on a private network", c.MetaListen))
	}
	return errors.Join(errs...)
}

// loopbackAddr reports whether addr's host is localhost or a loopback IP.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
