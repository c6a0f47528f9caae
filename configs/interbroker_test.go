package configs

import (
	"strings"
	"testing"
)

const testJAAS = `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="p\"w";`

// saslBroker is a broker whose one listener, CLIENT, is SASL_SSL.
func saslBroker() Config {
	c := Default()
	c.Listeners = []Listener{{Name: "CLIENT", View: "write", Address: "127.0.0.1:9093", Protocol: ProtocolSASLSSL}}
	c.SSLKeystoreLocation = "/etc/sluice/broker.pem"
	c.SSLTruststoreLocation = "/etc/sluice/ca.crt"
	c.ListenerOverrides = map[string]string{}
	return c
}

func TestInterBrokerResolves(t *testing.T) {
	c := saslBroker()
	c.InterBrokerListenerName = "client"
	c.SASLMechanismInterBrokerProtocol = "SCRAM-SHA-512"
	c.ListenerOverrides["listener.name.client.scram-sha-512.sasl.jaas.config"] = testJAAS
	c.ListenerOverrides["listener.name.client.ssl.truststore.location"] = "/etc/sluice/peers.crt"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.InterBrokerListener(); got != "CLIENT" {
		t.Fatalf("InterBrokerListener = %q", got)
	}
	ib, err := c.InterBroker("CLIENT", ProtocolSASLSSL)
	if err != nil {
		t.Fatal(err)
	}
	if !ib.UsesTLS() || !ib.UsesSASL() || ib.Mechanism != "SCRAM-SHA-512" || ib.Username != "broker" || ib.Password != `p"w` {
		t.Fatalf("InterBroker = %+v", ib)
	}
	if ib.TLS.KeystoreLocation != "/etc/sluice/broker.pem" || ib.TLS.TruststoreLocation != "/etc/sluice/peers.crt" || ib.TLS.ClientAuth != "" {
		t.Fatalf("TLS options %+v: want the broker's key store and the listener's trust store, no client auth", ib.TLS)
	}
	// A plaintext peer listener needs nothing.
	if ib, err := c.InterBroker("OTHER", ""); err != nil || ib.Protocol != ProtocolPlaintext || ib.UsesTLS() || ib.UsesSASL() {
		t.Fatalf("plaintext: %+v, %v", ib, err)
	}
	// security.inter.broker.protocol names the listener named like it.
	c.InterBrokerListenerName, c.SecurityInterBrokerProtocol = "", "sasl_ssl"
	if got := c.InterBrokerListener(); got != "SASL_SSL" {
		t.Fatalf("InterBrokerListener from security.inter.broker.protocol = %q", got)
	}
}

func TestInterBrokerValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		err  string
	}{
		{"both ways of naming the listener", func(c *Config) {
			c.InterBrokerListenerName, c.SecurityInterBrokerProtocol = "CLIENT", "SSL"
		}, "only one of inter.broker.listener.name and security.inter.broker.protocol"},
		{"unknown protocol", func(c *Config) { c.SecurityInterBrokerProtocol = "TLS" }, "security.inter.broker.protocol"},
		{"GSSAPI", func(c *Config) { c.SASLMechanismInterBrokerProtocol = "GSSAPI" }, "sasl.mechanism.inter.broker.protocol GSSAPI"},
		{"a SASL inter-broker listener without a mechanism", func(c *Config) {
			c.InterBrokerListenerName = "CLIENT"
			c.ListenerOverrides["listener.name.client.scram-sha-512.sasl.jaas.config"] = testJAAS
		}, "set sasl.mechanism.inter.broker.protocol"},
		{"a SASL inter-broker listener without credentials", func(c *Config) {
			c.InterBrokerListenerName, c.SASLMechanismInterBrokerProtocol = "CLIENT", "SCRAM-SHA-256"
			c.ListenerOverrides["listener.name.client.scram-sha-512.sasl.jaas.config"] = testJAAS
		}, "listener.name.client.scram-sha-256.sasl.jaas.config is not set"},
		{"a JAAS value without a password", func(c *Config) {
			c.InterBrokerListenerName, c.SASLMechanismInterBrokerProtocol = "CLIENT", "PLAIN"
			c.ListenerOverrides["listener.name.client.plain.sasl.jaas.config"] = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker";`
		}, "username and password are required"},
		{"a JAAS value that does not parse", func(c *Config) {
			c.ListenerOverrides["listener.name.client.plain.sasl.jaas.config"] = `PlainLoginModule required username="broker`
		}, "unterminated"},
		{"another login module", func(c *Config) {
			c.ListenerOverrides["listener.name.client.plain.sasl.jaas.config"] = `com.sun.security.auth.module.Krb5LoginModule required;`
		}, "want ScramLoginModule or PlainLoginModule"},
		{"keys of a listener this broker does not serve", func(c *Config) {
			c.ListenerOverrides["listener.name.internal.ssl.truststore.location"] = "/ca.crt"
		}, "which is not a listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := saslBroker()
			tc.mod(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Validate = %v, want %q", err, tc.err)
			}
		})
	}
	// The inter-broker listener's keys may be set where it is not served
	// (a read broker dialling write brokers).
	c := saslBroker()
	c.InterBrokerListenerName, c.SASLMechanismInterBrokerProtocol = "INTERNAL", "PLAIN"
	c.ListenerOverrides["listener.name.internal.plain.sasl.jaas.config"] = `org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="x";`
	c.ListenerOverrides["listener.name.internal.ssl.truststore.location"] = "/ca.crt"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"listener.name.client.scram-sha-512.sasl.jaas.config", "listener.name.client.plain.sasl.jaas.config"} {
		if err := CheckListenerOverride(key); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	if err := CheckListenerOverride("listener.name.client.gssapi.sasl.jaas.config"); err == nil {
		t.Error("a GSSAPI JAAS key was accepted")
	}
}
