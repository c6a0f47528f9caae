package configs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-broker/sluice/internal/clientconfig"
	"github.com/sluice-broker/sluice/internal/tlsconfig"
)

// InterBrokerListener is the listener name inter-broker requests go to
// (docs/security.md, "Between brokers"):
// inter.broker.listener.name, else the listener Kafka's
// security.inter.broker.protocol names (the one named like the protocol),
// else "" (each peer's first listener of the write or mixed view).
func (c Config) InterBrokerListener() string {
	if c.InterBrokerListenerName != "" {
		return strings.ToUpper(strings.TrimSpace(c.InterBrokerListenerName))
	}
	return strings.ToUpper(strings.TrimSpace(c.SecurityInterBrokerProtocol))
}

// InterBroker is how this broker dials a peer's listener: the protocol the
// peer registered for it, the TLS settings (the listener's ssl.* keys,
// its key store the client certificate) and the SASL mechanism and
// credentials.
type InterBroker struct {
	Listener  string
	Protocol  string
	TLS       tlsconfig.Options
	Mechanism string
	Username  string
	Password  string
}

// UsesTLS and UsesSASL say what the protocol asks for.
func (ib InterBroker) UsesTLS() bool {
	return ib.Protocol == ProtocolSSL || ib.Protocol == ProtocolSASLSSL
}
func (ib InterBroker) UsesSASL() bool {
	return ib.Protocol == ProtocolSASLPlaintext || ib.Protocol == ProtocolSASLSSL
}

// InterBroker resolves the client side of listener (a peer's listener of
// that name, speaking protocol): the broker-wide ssl.* keys with the
// listener's listener.name.<listener>.* overrides, as for a listener this
// broker serves, and for SASL sasl.mechanism.inter.broker.protocol with
// the username and password of
// listener.name.<listener>.<mechanism>.sasl.jaas.config.
func (c Config) InterBroker(listener, protocol string) (InterBroker, error) {
	if protocol == "" {
		protocol = ProtocolPlaintext
	}
	// Only the keys matter here: what ListenerSecurity checks is about
	// serving the listener (a key store, enabled mechanisms), which the
	// listeners this broker serves have had checked at start.
	ls, _ := c.ListenerSecurity(Listener{Name: listener, Protocol: protocol})
	ib := InterBroker{Listener: strings.ToUpper(listener), Protocol: protocol, TLS: ls.TLS}
	ib.TLS.ClientAuth = ""
	if !ib.UsesSASL() {
		return ib, nil
	}
	mech, err := c.interBrokerMechanism()
	if err != nil {
		return ib, err
	}
	if mech == "" {
		return ib, fmt.Errorf("listener %s is %s: set sasl.mechanism.inter.broker.protocol (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default GSSAPI is not served)", ib.Listener, protocol)
	}
	key := ListenerOverridePrefix + strings.ToLower(listener) + "." + strings.ToLower(mech) + jaasSuffix
	jaas, ok := ls.JAAS[mech]
	if !ok {
		return ib, fmt.Errorf("listener %s is %s: %s is not set (the credentials this broker authenticates with to other brokers)", ib.Listener, protocol, key)
	}
	user, pass, err := clientconfig.JAASCredentials(jaas)
	if err != nil {
		return ib, fmt.Errorf("%s: %w", key, err)
	}
	if user == "" || pass == "" {
		return ib, fmt.Errorf("%s: username and password are required", key)
	}
	ib.Mechanism, ib.Username, ib.Password = mech, user, pass
	return ib, nil
}

// interBrokerMechanism is sasl.mechanism.inter.broker.protocol ("" when
// unset), refused unless a broker can authenticate to another with it:
// a mechanism of a username and password, as clientconfig's clients.
func (c Config) interBrokerMechanism() (string, error) {
	mech := strings.ToUpper(strings.TrimSpace(c.SASLMechanismInterBrokerProtocol))
	if mech != "" && !clientconfig.Speaks(mech) {
		return mech, fmt.Errorf("sasl.mechanism.inter.broker.protocol %s: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mech)
	}
	return mech, nil
}

// validateInterBroker checks the inter-broker keys: one way of naming the
// listener, a known protocol and mechanism, every JAAS value readable, and
// for an inter-broker listener this broker serves with SASL, the
// credentials it needs.
func (c Config) validateInterBroker() error {
	var errs []error
	if c.InterBrokerListenerName != "" && c.SecurityInterBrokerProtocol != "" {
		errs = append(errs, errors.New("only one of inter.broker.listener.name and security.inter.broker.protocol may be set"))
	}
	if p := strings.ToUpper(strings.TrimSpace(c.SecurityInterBrokerProtocol)); p != "" && !securityProtocols[p] {
		errs = append(errs, fmt.Errorf("security.inter.broker.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", c.SecurityInterBrokerProtocol))
	}
	if _, err := c.interBrokerMechanism(); err != nil {
		errs = append(errs, err)
	}
	for k, v := range c.ListenerOverrides {
		if strings.HasSuffix(k, jaasSuffix) {
			if _, _, err := clientconfig.JAASCredentials(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
			}
		}
	}
	if name := c.InterBrokerListener(); name != "" {
		for _, l := range c.Listeners {
			if strings.EqualFold(l.Name, name) {
				if _, err := c.InterBroker(l.Name, l.Protocol); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}
