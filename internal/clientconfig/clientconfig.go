// Package clientconfig reads a Kafka client properties file, the file
// Kafka's tools take as --command-config (security.protocol, sasl.*,
// ssl.*), and turns it into franz-go client options. Sluice's own Kafka
// clients use it: the topic, group and cluster commands of cmd/sluice and
// sluice-bench. The TLS side is tlsconfig's: its table of the ssl.* keys,
// which the brokers' listeners read too (tlsconfig.Keys), and its PEM
// stores; SASL is franz-go's clients of PLAIN and SCRAM.
//
// Keys Kafka's clients know but these tools do not use (timeouts, buffer
// sizes, ...) are returned as Ignored, as Kafka logs "supplied but isn't a
// known config"; a security key this package cannot honour (a JKS store,
// GSSAPI, OAUTHBEARER, an unknown ssl.* or sasl.* key) is an error, never
// silently dropped.
package clientconfig

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/magiconair/properties"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
)

// Security protocols (Kafka's security.protocol values).
const (
	Plaintext     = "PLAINTEXT"
	SSL           = "SSL"
	SASLPlaintext = "SASL_PLAINTEXT"
	SASLSSL       = "SASL_SSL"
)

// Config is a parsed client properties file.
type Config struct {
	// BootstrapServers is bootstrap.servers, if the file has it.
	BootstrapServers []string
	ClientID         string
	Protocol         string // security.protocol; PLAINTEXT when absent
	Mechanism        string // sasl.mechanism (Kafka's default GSSAPI is refused)
	Username         string
	Password         string
	TLS              tlsconfig.Options
	// VerifyHostname is ssl.endpoint.identification.algorithm=https,
	// Kafka's default; an empty value turns the name check off.
	VerifyHostname bool
	// Ignored are the keys read and left unused.
	Ignored []string
}

// ignorable are client keys of Kafka's that change nothing a command of
// these tools does; they are accepted and reported as ignored.
var ignorable = []string{"request.timeout.ms", "default.api.timeout.ms", "retries", "retry.backoff.ms", "retry.backoff.max.ms",
	"reconnect.backoff.ms", "reconnect.backoff.max.ms", "connections.max.idle.ms", "metadata.max.age.ms", "send.buffer.bytes",
	"receive.buffer.bytes", "client.dns.lookup", "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
	"metric.reporters", "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms", "auto.include.jmx.reporter",
	"enable.metrics.push", "ssl.protocol", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
	"ssl.engine.factory.class", "ssl.provider", "sasl.kerberos.service.name", "sasl.login.refresh.window.factor",
	"sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
	"sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms", "sasl.login.retry.backoff.ms", "sasl.login.retry.backoff.max.ms",
	"security.providers", "client.rack", "group.id"}

// Load reads the properties file at path.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := Parse(string(b))
	if err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse reads properties in Java's format, as Kafka's tools load
// --command-config (Properties.load: no ${...} expansion).
func Parse(text string) (Config, error) {
	c, err := parse(text)
	slices.Sort(c.Ignored)
	c.Ignored = slices.Compact(c.Ignored)
	return c, err
}

func parse(text string) (Config, error) {
	l := properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}
	p, err := l.LoadBytes([]byte(text))
	if err != nil {
		return Config{}, err
	}
	c := Config{Protocol: Plaintext, VerifyHostname: true}
	var jaas string
	var ssl tlsconfig.Keys
	for _, k := range p.Keys() {
		v, _ := p.Get(k)
		v = strings.TrimSpace(v)
		switch k {
		case "bootstrap.servers":
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					c.BootstrapServers = append(c.BootstrapServers, s)
				}
			}
		case "client.id":
			c.ClientID = v
		case "security.protocol":
			c.Protocol = strings.ToUpper(v)
		case "sasl.mechanism":
			c.Mechanism = strings.ToUpper(v)
		case "sasl.jaas.config":
			jaas = v
		// librdkafka's names, which kcat users carry over.
		case "sasl.username":
			c.Username = v
		case "sasl.password":
			c.Password = v
		case "ssl.truststore.password":
			// A PEM trust store has no password; Kafka refuses one.
			if v != "" {
				return c, errors.New("ssl.truststore.password: a PEM trust store takes no password")
			}
		case "ssl.keystore.password":
			// Kafka's PEM key store: the key's password when
			// ssl.key.password is not set.
			if ssl.SSLKeyPassword == "" {
				ssl.SSLKeyPassword = v
			}
		case "ssl.endpoint.identification.algorithm":
			switch strings.ToLower(v) {
			case "https":
				c.VerifyHostname = true
			case "":
				c.VerifyHostname = false
			default:
				return c, fmt.Errorf("ssl.endpoint.identification.algorithm %q: want https or empty", v)
			}
		default:
			// The ssl.* keys clients share with the listeners; not
			// ssl.client.auth, a broker's key Kafka's clients do not
			// know.
			if k != tlsconfig.ServerOnlyKey && ssl.Set(k, v) {
				continue
			}
			if slices.Contains(ignorable, k) {
				c.Ignored = append(c.Ignored, k)
				continue
			}
			if strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "sasl.") || strings.HasPrefix(k, "security.") {
				return c, fmt.Errorf("%s: not supported by this tool", k)
			}
			c.Ignored = append(c.Ignored, k)
		}
	}
	c.TLS = ssl.Options()
	switch c.Protocol {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
	default:
		return c, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", c.Protocol)
	}
	if !c.usesTLS() {
		// As Kafka: ssl.* keys do nothing on a plaintext protocol.
		for _, k := range p.Keys() {
			if strings.HasPrefix(k, "ssl.") {
				c.Ignored = append(c.Ignored, k)
			}
		}
		c.TLS = tlsconfig.Options{}
	}
	if !c.usesSASL() {
		for _, k := range p.Keys() {
			if strings.HasPrefix(k, "sasl.") {
				c.Ignored = append(c.Ignored, k)
			}
		}
		c.Mechanism, c.Username, c.Password = "", "", ""
		return c, nil
	}
	if c.Mechanism == "" {
		c.Mechanism = "GSSAPI" // Kafka's default
	}
	if !Speaks(c.Mechanism) {
		return c, fmt.Errorf("sasl.mechanism %s: this tool speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", c.Mechanism)
	}
	if jaas != "" {
		if c.Username != "" || c.Password != "" {
			return c, errors.New("set sasl.jaas.config or sasl.username/sasl.password, not both")
		}
		var err error
		if c.Username, c.Password, err = JAASCredentials(jaas); err != nil {
			return c, fmt.Errorf("sasl.jaas.config: %w", err)
		}
	}
	if c.Username == "" {
		return c, fmt.Errorf("sasl.mechanism %s needs a user: sasl.jaas.config with username and password (or sasl.username and sasl.password)", c.Mechanism)
	}
	return c, nil
}

func (c Config) usesSASL() bool { return c.Protocol == SASLPlaintext || c.Protocol == SASLSSL }
func (c Config) usesTLS() bool  { return c.Protocol == SSL || c.Protocol == SASLSSL }

// Opts are the franz-go options of c: TLS and SASL as its protocol says,
// and the client id.
func (c Config) Opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if c.ClientID != "" {
		opts = append(opts, kgo.ClientID(c.ClientID))
	}
	if c.usesTLS() {
		tc, err := c.TLS.Client(c.VerifyHostname)
		if err != nil {
			return nil, err
		}
		// franz-go sets each connection's ServerName to the host it
		// dials when the config has none.
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.usesSASL() {
		opts = append(opts, kgo.SASL(SASLMechanism(c.Mechanism, c.Username, c.Password)))
	}
	return opts, nil
}

// JAASCredentials reads the username and password options of a
// sasl.jaas.config value naming Kafka's ScramLoginModule or
// PlainLoginModule, as those modules read them (other options are left
// alone). Brokers read their inter-broker credentials with it too.
func JAASCredentials(jaas string) (username, password string, err error) {
	module, opts, err := parseJAAS(jaas)
	if err != nil {
		return "", "", err
	}
	switch module {
	case "org.apache.kafka.common.security.scram.ScramLoginModule", "org.apache.kafka.common.security.plain.PlainLoginModule":
	default:
		return "", "", fmt.Errorf("login module %s: want ScramLoginModule or PlainLoginModule", module)
	}
	return opts["username"], opts["password"], nil
}

// SASLMechanism is franz-go's client of mechanism (PLAIN, SCRAM-SHA-256
// or SCRAM-SHA-512) for user and password; nil for another mechanism.
func SASLMechanism(mechanism, user, password string) sasl.Mechanism {
	switch mechanism {
	case "PLAIN":
		return plain.Auth{User: user, Pass: password}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	}
	return nil
}

// Speaks reports whether SASLMechanism has a client of mechanism: the
// mechanisms a user authenticates with by username and password (the
// server's, internal/sasl, less OAUTHBEARER). Brokers authenticate to
// each other with these too.
func Speaks(mechanism string) bool { return SASLMechanism(mechanism, "", "") != nil }

// parseJAAS reads the one login module of a sasl.jaas.config value:
//
//	<class> <required|requisite|sufficient|optional> [key=value ...];
//
// with values bare or in double quotes (backslash escapes the next
// character), as Kafka's JaasConfig parser takes them.
func parseJAAS(s string) (module string, opts map[string]string, err error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return "", nil, err
	}
	if len(toks) < 3 || toks[len(toks)-1] != ";" {
		return "", nil, errors.New(`want "<LoginModule> required key=\"value\" ...;"`)
	}
	module, flag := toks[0], strings.ToLower(toks[1])
	switch flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, fmt.Errorf("control flag %q: want required, requisite, sufficient or optional", toks[1])
	}
	opts = map[string]string{}
	rest := toks[2 : len(toks)-1]
	for i := 0; i < len(rest); i += 3 {
		if i+2 >= len(rest) || rest[i+1] != "=" || rest[i] == ";" {
			return "", nil, errors.New("options must be key=value; exactly one login module")
		}
		opts[rest[i]] = rest[i+2]
	}
	return module, opts, nil
}

// jaasTokens splits s into words, quoted strings (unquoted), "=" and ";".
func jaasTokens(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			i++
		case ch == '=' || ch == ';':
			toks = append(toks, string(ch))
			i++
		case ch == '"':
			var b strings.Builder
			i++
			closed := false
			for i < len(s) {
				if s[i] == '\\' && i+1 < len(s) {
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				if s[i] == '"' {
					closed = true
					i++
					break
				}
				b.WriteByte(s[i])
				i++
			}
			if !closed {
				return nil, errors.New("unterminated quoted value")
			}
			toks = append(toks, b.String())
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n=;\"", rune(s[j])) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}
