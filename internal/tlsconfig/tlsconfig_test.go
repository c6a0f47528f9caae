package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// handshake dials a server using srv and returns the certificate it
// presented; a failure on either side is the error.
func handshake(t *testing.T, srv *tls.Config, client *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			err = c.(*tls.Conn).Handshake()
			c.Close()
		}
		srvErr <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := <-srvErr; err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func pool(t *testing.T, caFile string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(b)
	return p
}

// A certificate replaced on disk is served from the next handshake on; a
// broken replacement keeps the previous one.
func TestReloadOnChange(t *testing.T) {
	dir := t.TempDir()
	first, err := GenerateDev(filepath.Join(dir, "a"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(dir, "server.pem")
	copyFile(t, first.Server, live)
	ld, err := NewLoader(Options{KeystoreLocation: live})
	if err != nil {
		t.Fatal(err)
	}
	cert1, err := handshake(t, ld.ServerConfig(), &tls.Config{RootCAs: pool(t, first.CA)})
	if err != nil {
		t.Fatal(err)
	}
	second, err := GenerateDev(filepath.Join(dir, "b"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, second.Server, live)
	os.Chtimes(live, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	ld.mu.Lock()
	ld.checked = time.Time{} // skip the once-a-second wait
	ld.mu.Unlock()
	cert2, err := handshake(t, ld.ServerConfig(), &tls.Config{RootCAs: pool(t, second.CA)})
	if err != nil {
		t.Fatalf("after the renewal: %v", err)
	}
	if cert1.SerialNumber.Cmp(cert2.SerialNumber) == 0 {
		t.Fatal("the renewed certificate is not served")
	}
	if err := os.WriteFile(live, []byte("half-written"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(live, time.Now().Add(2*time.Minute), time.Now().Add(2*time.Minute))
	ld.mu.Lock()
	ld.checked = time.Time{}
	ld.mu.Unlock()
	if _, err := handshake(t, ld.ServerConfig(), &tls.Config{RootCAs: pool(t, second.CA)}); err != nil {
		t.Fatalf("a broken file replaced the working certificate: %v", err)
	}
	if ld.LastError() == nil {
		t.Error("the failed reload is not reported")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Mutual TLS: required client auth refuses a client without a certificate
// and accepts one signed by the trust store.
func TestClientAuth(t *testing.T) {
	dir := t.TempDir()
	ca, err := GenerateDev(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewLoader(Options{KeystoreLocation: ca.Server, TruststoreLocation: ca.CA, ClientAuth: "required"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(t, srv.ServerConfig(), &tls.Config{RootCAs: pool(t, ca.CA)}); err == nil {
		t.Fatal("a client without a certificate was accepted under ssl.client.auth=required")
	}
	cl, err := NewLoader(Options{KeystoreLocation: ca.Server, TruststoreLocation: ca.CA})
	if err != nil {
		t.Fatal(err)
	}
	ccfg := cl.ClientConfig("127.0.0.1")
	if _, err := handshake(t, srv.ServerConfig(), ccfg); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
}

func TestEncryptedKeys(t *testing.T) {
	chain, err := os.ReadFile("testdata/cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, password, err string
	}{
		{file: "key-pkcs8-aes256.pem", password: "test-pass"},
		{file: "key-pkcs8-aes128-sha1.pem", password: "test-pass"},
		{file: "key-legacy.pem", password: "test-pass"},
		{file: "key-pkcs8-aes256.pem", password: "wrong", err: "ssl.key.password"},
		{file: "key-pkcs8-aes256.pem", err: "set ssl.key.password"},
		{file: "key-legacy.pem", err: "set ssl.key.password"},
	} {
		key, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewLoader(Options{KeystoreCertificateChain: string(chain), KeystoreKey: string(key), KeyPassword: tc.password})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s with %q: %v, want %q", tc.file, tc.password, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{KeystoreLocation: "/k.pem"}
	for _, tc := range []struct {
		name string
		edit func(*Options)
		err  string
	}{
		{name: "defaults"},
		{name: "JKS", edit: func(o *Options) { o.KeystoreType = "JKS" }, err: "only PEM"},
		{name: "no key store", edit: func(o *Options) { o.KeystoreLocation = "" }, err: "required"},
		{name: "both key store forms", edit: func(o *Options) { o.KeystoreKey = "x" }, err: "not both"},
		{name: "client auth without trust store", edit: func(o *Options) { o.ClientAuth = "required" }, err: "trust store"},
		{name: "bad client auth", edit: func(o *Options) { o.ClientAuth = "always" }, err: "none, requested or required"},
		{name: "TLSv1.1", edit: func(o *Options) { o.EnabledProtocols = []string{"TLSv1.1"} }, err: "not offered"},
		{name: "TLSv1.3 only", edit: func(o *Options) { o.EnabledProtocols = []string{"TLSv1.3"} }},
		{name: "cipher suite", edit: func(o *Options) { o.CipherSuites = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"} }},
		{name: "insecure cipher suite", edit: func(o *Options) { o.CipherSuites = []string{"TLS_RSA_WITH_RC4_128_SHA"} }, err: "not a supported"},
	} {
		o := ok
		if tc.edit != nil {
			tc.edit(&o)
		}
		err := o.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}
