package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Client is the tls.Config of a Kafka client from Kafka's client-side
// ssl.* settings, as Kafka's tools read them from --command-config: the
// trust store (ssl.truststore.*) verifies the brokers, else the system's
// roots do; a key store (ssl.keystore.*, optional) is the client
// certificate for a listener with ssl.client.auth. verifyHostname is
// ssl.endpoint.identification.algorithm=https (Kafka's default): the
// broker's certificate must name the host dialled. Without it the chain is
// still verified against the trust store, only the name is not checked.
// The files are read once (a client's life is one command).
func (o Options) Client(verifyHostname bool) (*tls.Config, error) {
	if o.ClientAuth != "" {
		return nil, errors.New("ssl.client.auth is a broker setting")
	}
	if o.KeystoreLocation != "" && (o.KeystoreCertificateChain != "" || o.KeystoreKey != "") {
		return nil, errors.New("set ssl.keystore.location or ssl.keystore.certificate.chain/ssl.keystore.key, not both")
	}
	if (o.KeystoreCertificateChain == "") != (o.KeystoreKey == "") {
		return nil, errors.New("ssl.keystore.certificate.chain and ssl.keystore.key go together")
	}
	if o.TruststoreLocation != "" && o.TruststoreCertificates != "" {
		return nil, errors.New("set ssl.truststore.location or ssl.truststore.certificates, not both")
	}
	cfg, err := o.baseConfig()
	if err != nil {
		return nil, err
	}
	if o.KeystoreLocation != "" || o.KeystoreKey != "" {
		cert, err := o.certificate()
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	trustPEM := []byte(o.TruststoreCertificates)
	if o.TruststoreLocation != "" {
		if trustPEM, err = os.ReadFile(o.TruststoreLocation); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
	}
	var roots *x509.CertPool // nil: the system's roots
	if len(trustPEM) > 0 {
		if roots, err = trustPool(trustPEM); err != nil {
			return nil, err
		}
	}
	cfg.RootCAs = roots
	if !verifyHostname {
		// crypto/tls verifies the chain and the name together; the chain
		// alone is verified here instead.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tls: the broker presented no certificate")
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				opts.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(opts)
			return err
		}
	}
	return cfg, nil
}
