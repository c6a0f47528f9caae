package tlsconfig

import "strings"

// Keys are Kafka's ssl.* settings in their written form, one field a key:
// the one table of those names. The broker's configuration (the defaults
// of every listener, and a listener's listener.name.<name>.ssl.*
// overrides) and the client properties files of Sluice's own tools both
// fill a Keys through Set and turn it into Options with Options; what
// differs between the two sides stays with the side it belongs to (a
// client has no ssl.client.auth, and its own keys such as
// ssl.endpoint.identification.algorithm).
//
// Stores are PEM only (Kafka's ssl.keystore.type=PEM form): a file with
// the key and the chain, or both inline.
type Keys struct {
	SSLKeystoreType             string `mapstructure:"ssl.keystore.type"`
	SSLKeystoreLocation         string `mapstructure:"ssl.keystore.location"`
	SSLKeystoreCertificateChain string `mapstructure:"ssl.keystore.certificate.chain"`
	SSLKeystoreKey              string `mapstructure:"ssl.keystore.key"`
	SSLKeyPassword              string `mapstructure:"ssl.key.password"`
	SSLTruststoreType           string `mapstructure:"ssl.truststore.type"`
	SSLTruststoreLocation       string `mapstructure:"ssl.truststore.location"`
	SSLTruststoreCertificates   string `mapstructure:"ssl.truststore.certificates"`
	// SSLClientAuth: none, requested or required (mutual TLS; the
	// principal of an SSL listener is then the certificate's subject). A
	// server's key: Kafka's clients do not know it.
	SSLClientAuth string `mapstructure:"ssl.client.auth"`
	// SSLEnabledProtocols: comma-separated, of TLSv1.2 and TLSv1.3.
	SSLEnabledProtocols string `mapstructure:"ssl.enabled.protocols"`
	// SSLCipherSuites: comma-separated IANA names; empty: Go's secure
	// defaults (TLS 1.3 suites are always on).
	SSLCipherSuites string `mapstructure:"ssl.cipher.suites"`
}

// ServerOnlyKey is the key of Keys a client does not take.
const ServerOnlyKey = "ssl.client.auth"

// keyTable names each field of Keys by its Kafka key (the same names as
// the mapstructure tags; a test keeps the two in step).
var keyTable = []struct {
	name  string
	field func(*Keys) *string
}{
	{"ssl.keystore.type", func(k *Keys) *string { return &k.SSLKeystoreType }},
	{"ssl.keystore.location", func(k *Keys) *string { return &k.SSLKeystoreLocation }},
	{"ssl.keystore.certificate.chain", func(k *Keys) *string { return &k.SSLKeystoreCertificateChain }},
	{"ssl.keystore.key", func(k *Keys) *string { return &k.SSLKeystoreKey }},
	{"ssl.key.password", func(k *Keys) *string { return &k.SSLKeyPassword }},
	{"ssl.truststore.type", func(k *Keys) *string { return &k.SSLTruststoreType }},
	{"ssl.truststore.location", func(k *Keys) *string { return &k.SSLTruststoreLocation }},
	{"ssl.truststore.certificates", func(k *Keys) *string { return &k.SSLTruststoreCertificates }},
	{"ssl.client.auth", func(k *Keys) *string { return &k.SSLClientAuth }},
	{"ssl.enabled.protocols", func(k *Keys) *string { return &k.SSLEnabledProtocols }},
	{"ssl.cipher.suites", func(k *Keys) *string { return &k.SSLCipherSuites }},
}

// KeyNames are the keys of Keys, in the order of its fields.
func KeyNames() []string {
	out := make([]string, len(keyTable))
	for i, e := range keyTable {
		out[i] = e.name
	}
	return out
}

// Set assigns key (a name of KeyNames) from its written form; it returns
// false, and changes nothing, for any other key.
func (k *Keys) Set(key, val string) bool {
	for _, e := range keyTable {
		if e.name == key {
			*e.field(k) = val
			return true
		}
	}
	return false
}

// Options are the TLS options k's keys give.
func (k Keys) Options() Options {
	return Options{
		KeystoreType:             k.SSLKeystoreType,
		KeystoreLocation:         k.SSLKeystoreLocation,
		KeystoreCertificateChain: k.SSLKeystoreCertificateChain,
		KeystoreKey:              k.SSLKeystoreKey,
		KeyPassword:              k.SSLKeyPassword,
		TruststoreType:           k.SSLTruststoreType,
		TruststoreLocation:       k.SSLTruststoreLocation,
		TruststoreCertificates:   k.SSLTruststoreCertificates,
		ClientAuth:               k.SSLClientAuth,
		EnabledProtocols:         splitList(k.SSLEnabledProtocols),
		CipherSuites:             splitList(k.SSLCipherSuites),
	}
}

// splitList splits a comma-separated value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
