package tlsconfig_test

import (
	"crypto/tls"
	"testing"

	"github.com/sluice-broker/sluice/internal/tlsconfig"
	"github.com/sluice-broker/sluice/internal/tlsconfig/pkitest"
)

// TestCertNamesNode: a certificate names node N only by the DNS name
// broker-N; the common name, other ids and prefixes do not count.
func TestCertNamesNode(t *testing.T) {
	ca := pkitest.NewCA(t, "ca")
	for _, tc := range []struct {
		name string
		cn   string
		dns  []string
		id   int64
		ok   bool
	}{
		{"dns name", "x", []string{"broker-3"}, 3, true},
		{"one of several", "x", []string{"host.example", "broker-3"}, 3, true},
		{"other id", "x", []string{"broker-4"}, 3, false},
		{"prefix of the id", "x", []string{"broker-31"}, 3, false},
		{"common name only", "broker-3", nil, 3, false},
		{"negative id", "x", []string{"broker--1"}, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks := ca.Issue(t, tc.cn, tc.dns...)
			cert, err := tls.X509KeyPair(ks, ks)
			if err != nil {
				t.Fatal(err)
			}
			err = tlsconfig.CertNamesNode(cert.Leaf, tc.id)
			if (err == nil) != tc.ok {
				t.Fatalf("CertNamesNode(%v, %d) = %v, want ok=%v", tc.dns, tc.id, err, tc.ok)
			}
		})
	}
}

// TestValidateInternal: an internal port needs a key store and a trust
// store.
func TestValidateInternal(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    tlsconfig.Options
		ok   bool
	}{
		{"both", tlsconfig.Options{KeystoreLocation: "k.pem", TruststoreLocation: "ca.crt"}, true},
		{"no trust store", tlsconfig.Options{KeystoreLocation: "k.pem"}, false},
		{"no key store", tlsconfig.Options{TruststoreLocation: "ca.crt"}, false},
		{"not PEM", tlsconfig.Options{KeystoreLocation: "k.jks", KeystoreType: "JKS", TruststoreLocation: "ca.crt"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tlsconfig.ValidateInternal(tc.o); (err == nil) != tc.ok {
				t.Fatalf("ValidateInternal = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
