package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"
)

// The principal of a mutual-TLS client is its certificate's subject in
// RFC 2253 order, most specific first, as Kafka's default principal
// builder gives it (X500Principal.getName()).
func TestSubjectName(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, tc := range []struct {
		subject pkix.Name
		want    string
	}{
		{pkix.Name{CommonName: "client"}, "CN=client"},
		{pkix.Name{CommonName: "writer", OrganizationalUnit: []string{"eng"}, Organization: []string{"Acme, Inc."}, Country: []string{"US"}},
			`CN=writer,OU=eng,O=Acme\, Inc.,C=US`},
	} {
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: tc.subject, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		cert, _ := x509.ParseCertificate(der)
		if got := subjectName(cert.RawSubject); got != tc.want {
			t.Errorf("subject %v: %q, want %q", tc.subject, got, tc.want)
		}
	}
}
