package tlsconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// DevFiles are the files GenerateDev writes into its directory.
type DevFiles struct {
	CA     string // ca.crt: the CA certificate clients trust
	CAKey  string // ca.key: the CA's private key (kept for issuing more)
	Server string // server.pem: the server's private key and certificate chain
}

// GenerateDev makes a private CA and a server certificate signed by it for
// hosts (DNS names or IP addresses) in dir, once: files already there are
// kept, so clients that trust the CA keep working across restarts. It is
// meant for a development broker (sluice dev --secure), not for production
// certificates.
func GenerateDev(dir string, hosts []string) (DevFiles, error) {
	f := DevFiles{CA: filepath.Join(dir, "ca.crt"), CAKey: filepath.Join(dir, "ca.key"), Server: filepath.Join(dir, "server.pem")}
	if _, err := os.Stat(f.Server); err == nil {
		if _, err := os.Stat(f.CA); err == nil {
			return f, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Sluice development CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return f, err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "sluice"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(2, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			srvTmpl.IPAddresses = append(srvTmpl.IPAddresses, ip)
		} else if h != "" {
			srvTmpl.DNSNames = append(srvTmpl.DNSNames, h)
		}
	}
	if len(srvTmpl.IPAddresses)+len(srvTmpl.DNSNames) == 0 {
		return f, errors.New("tlsconfig: no host for the server certificate")
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	caKeyDER, err := x509.MarshalPKCS8PrivateKey(caKey)
	if err != nil {
		return f, err
	}
	srvKeyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		return f, err
	}
	server := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: srvKeyDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})...)
	server = append(server, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{f.CAKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: caKeyDER}), 0o600},
		{f.Server, server, 0o600},
		{f.CA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644},
	} {
		if err := os.WriteFile(w.path, w.data, w.mode); err != nil {
			return f, fmt.Errorf("tlsconfig: %w", err)
		}
	}
	return f, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err)
	}
	return n
}
