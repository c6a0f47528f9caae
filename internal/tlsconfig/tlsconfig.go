// Package tlsconfig builds crypto/tls configurations from Kafka's ssl.*
// settings (PEM key stores and trust stores only) and keeps them current:
// the certificate, key and trusted CAs are read again from their files when
// a file's modification time or size changes, so a renewed certificate is
// served from the next handshake on without a restart. The Kafka listeners
// use it, as do the replication and metastore ports' mutual TLS (peer.go)
// and the Kafka clients of Sluice's own tools (Client, client.go).
//
// Kafka's PEM form is followed: ssl.keystore.location names one file with
// the private key and the certificate chain, or ssl.keystore.key and
// ssl.keystore.certificate.chain hold them inline; an encrypted key
// (PKCS#8 "ENCRYPTED PRIVATE KEY" with PBES2, or a legacy OpenSSL
// "Proc-Type: 4,ENCRYPTED" block) is opened with ssl.key.password.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// Options are Kafka's ssl.* settings of one listener (or one internal
// transport), already resolved from their listener-prefixed overrides.
type Options struct {
	KeystoreType             string // ssl.keystore.type: PEM (or empty)
	KeystoreLocation         string // ssl.keystore.location: key and chain in one PEM file
	KeystoreCertificateChain string // ssl.keystore.certificate.chain: inline PEM
	KeystoreKey              string // ssl.keystore.key: inline PEM
	KeyPassword              string // ssl.key.password
	TruststoreType           string // ssl.truststore.type: PEM (or empty)
	TruststoreLocation       string // ssl.truststore.location: PEM file of CA certificates
	TruststoreCertificates   string // ssl.truststore.certificates: inline PEM
	// ClientAuth is ssl.client.auth: none, requested or required.
	ClientAuth string
	// EnabledProtocols is ssl.enabled.protocols: TLSv1.2, TLSv1.3.
	EnabledProtocols []string
	// CipherSuites is ssl.cipher.suites, by IANA (or Go) name; empty: Go's
	// defaults. TLS 1.3 suites are not configurable in Go and always on.
	CipherSuites []string
}

// checkInterval bounds how often the files' metadata is looked at: at most
// once a second, on a handshake.
const checkInterval = time.Second

// Loader hands out the current certificate and trust pool; it is safe for
// concurrent handshakes.
type Loader struct {
	opts Options
	base *tls.Config

	mu        sync.Mutex
	checked   time.Time
	stamps    map[string]fileStamp
	cfg       *tls.Config // base plus the current certificate and pool
	lastError error
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// Validate checks o without reading any file: the types, client auth,
// protocols and cipher suites, and that a key store is given.
func (o Options) Validate() error {
	_, err := o.baseConfig()
	if err != nil {
		return err
	}
	if o.KeystoreLocation == "" && (o.KeystoreCertificateChain == "" || o.KeystoreKey == "") {
		return errors.New("ssl.keystore.location (or ssl.keystore.certificate.chain and ssl.keystore.key) is required")
	}
	if o.KeystoreLocation != "" && (o.KeystoreCertificateChain != "" || o.KeystoreKey != "") {
		return errors.New("set ssl.keystore.location or ssl.keystore.certificate.chain/ssl.keystore.key, not both")
	}
	if o.TruststoreLocation != "" && o.TruststoreCertificates != "" {
		return errors.New("set ssl.truststore.location or ssl.truststore.certificates, not both")
	}
	return nil
}

func (o Options) baseConfig() (*tls.Config, error) {
	for _, t := range []struct{ key, val string }{{"ssl.keystore.type", o.KeystoreType}, {"ssl.truststore.type", o.TruststoreType}} {
		if t.val != "" && !strings.EqualFold(t.val, "PEM") {
			return nil, fmt.Errorf("%s %q: only PEM is supported", t.key, t.val)
		}
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13}
	switch strings.ToLower(o.ClientAuth) {
	case "", "none":
		c.ClientAuth = tls.NoClientCert
	case "requested":
		c.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		c.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, fmt.Errorf("ssl.client.auth %q: want none, requested or required", o.ClientAuth)
	}
	if c.ClientAuth != tls.NoClientCert && o.TruststoreLocation == "" && o.TruststoreCertificates == "" {
		return nil, fmt.Errorf("ssl.client.auth=%s needs a trust store (ssl.truststore.location or ssl.truststore.certificates)", o.ClientAuth)
	}
	if len(o.EnabledProtocols) > 0 {
		lo, hi := uint16(0), uint16(0)
		for _, p := range o.EnabledProtocols {
			var v uint16
			switch strings.TrimSpace(p) {
			case "TLSv1.2":
				v = tls.VersionTLS12
			case "TLSv1.3":
				v = tls.VersionTLS13
			case "TLSv1", "TLSv1.1", "SSLv3":
				return nil, fmt.Errorf("ssl.enabled.protocols: %s is not offered (TLSv1.2 and TLSv1.3 only)", p)
			default:
				return nil, fmt.Errorf("ssl.enabled.protocols: unknown protocol %q", p)
			}
			if lo == 0 || v < lo {
				lo = v
			}
			if v > hi {
				hi = v
			}
		}
		c.MinVersion, c.MaxVersion = lo, hi
	}
	if len(o.CipherSuites) > 0 {
		byName := map[string]uint16{}
		for _, s := range tls.CipherSuites() {
			byName[s.Name] = s.ID
		}
		for _, name := range o.CipherSuites {
			name = strings.TrimSpace(name)
			id, ok := byName[name]
			if !ok {
				return nil, fmt.Errorf("ssl.cipher.suites: %q is not a supported (secure) cipher suite", name)
			}
			c.CipherSuites = append(c.CipherSuites, id)
		}
	}
	return c, nil
}

// NewLoader validates o and loads its files once; an error here is a
// configuration error the process should not start with.
func NewLoader(o Options) (*Loader, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	base, err := o.baseConfig()
	if err != nil {
		return nil, err
	}
	l := &Loader{opts: o, base: base}
	if err := l.reload(time.Now()); err != nil {
		return nil, err
	}
	return l, nil
}

// ServerConfig is the tls.Config for a listener: every handshake takes
// the current certificate and client CAs through GetConfigForClient.
func (l *Loader) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: l.base.MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return l.current(), nil
		},
	}
}

// ClientConfig is a tls.Config for dialing a peer that presents a
// certificate signed by the trust store, presenting the key store's
// certificate in turn (mutual TLS between Sluice's own processes).
func (l *Loader) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{
		ServerName: serverName,
		MinVersion: l.base.MinVersion,
		MaxVersion: l.base.MaxVersion,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c := l.current()
			return &c.Certificates[0], nil
		},
		RootCAs: l.current().ClientCAs,
	}
}

// LastError is the error of the latest failed reload (the previous
// certificate stays in use), or nil.
func (l *Loader) LastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastError
}

// current returns the configuration to use now, reading the files again
// if one of them changed since they were last read. A failed reload
// (a half-written file, a key that does not match) keeps the previous
// configuration: a renewal in progress never breaks handshakes.
func (l *Loader) current() *tls.Config {
	now := time.Now()
	l.mu.Lock()
	due := now.Sub(l.checked) >= checkInterval
	cfg := l.cfg
	l.mu.Unlock()
	if !due {
		return cfg
	}
	_ = l.reload(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

func (l *Loader) files() []string {
	var out []string
	for _, p := range []string{l.opts.KeystoreLocation, l.opts.TruststoreLocation} {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// reload re-reads the files when their stamps changed (always the first
// time).
func (l *Loader) reload(now time.Time) error {
	stamps := map[string]fileStamp{}
	for _, p := range l.files() {
		fi, err := os.Stat(p)
		if err != nil {
			return l.failed(now, err)
		}
		stamps[p] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	l.mu.Lock()
	same := l.cfg != nil && len(stamps) == len(l.stamps)
	for p, s := range stamps {
		same = same && l.stamps[p] == s
	}
	if same {
		l.checked = now
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	cfg, err := l.build()
	if err != nil {
		return l.failed(now, err)
	}
	l.mu.Lock()
	l.cfg, l.stamps, l.checked, l.lastError = cfg, stamps, now, nil
	l.mu.Unlock()
	return nil
}

func (l *Loader) failed(now time.Time, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checked = now
	l.lastError = err
	return err
}

// certificate reads the key store: a PEM file holding the chain and the
// key (ssl.keystore.location), or both given inline.
func (o Options) certificate() (tls.Certificate, error) {
	chainPEM, keyPEM := []byte(o.KeystoreCertificateChain), []byte(o.KeystoreKey)
	if o.KeystoreLocation != "" {
		b, err := os.ReadFile(o.KeystoreLocation)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		chainPEM, keyPEM = b, b
	}
	cert, err := keyPair(chainPEM, keyPEM, o.KeyPassword)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("key store: %w", err)
	}
	return cert, nil
}

func (l *Loader) build() (*tls.Config, error) {
	o := l.opts
	cert, err := o.certificate()
	if err != nil {
		return nil, err
	}
	cfg := l.base.Clone()
	cfg.Certificates = []tls.Certificate{cert}
	trustPEM := []byte(o.TruststoreCertificates)
	if o.TruststoreLocation != "" {
		if trustPEM, err = os.ReadFile(o.TruststoreLocation); err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
	}
	if len(trustPEM) > 0 {
		if cfg.ClientCAs, err = trustPool(trustPEM); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// trustPool reads every CERTIFICATE block of a PEM trust store.
func trustPool(trustPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := trustPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("trust store: %w", err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("trust store: no CERTIFICATE block")
	}
	return pool, nil
}

// keyPair reads the certificate chain from chainPEM and the (possibly
// encrypted) private key from keyPEM.
func keyPair(chainPEM, keyPEM []byte, password string) (tls.Certificate, error) {
	var certs [][]byte
	var keyBlock *pem.Block
	for rest := chainPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			certs = append(certs, b.Bytes)
		}
	}
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if strings.HasSuffix(b.Type, "PRIVATE KEY") {
			keyBlock = b
			break
		}
	}
	if len(certs) == 0 {
		return tls.Certificate{}, errors.New("no CERTIFICATE block")
	}
	if keyBlock == nil {
		return tls.Certificate{}, errors.New("no PRIVATE KEY block")
	}
	der, err := decryptKey(keyBlock, password)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyOut := pem.EncodeToMemory(&pem.Block{Type: unencryptedType(keyBlock.Type), Bytes: der})
	var chainOut []byte
	for _, c := range certs {
		chainOut = append(chainOut, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c})...)
	}
	cert, err := tls.X509KeyPair(chainOut, keyOut)
	if err != nil {
		return tls.Certificate{}, err
	}
	return cert, nil
}

func unencryptedType(t string) string {
	if t == "ENCRYPTED PRIVATE KEY" {
		return "PRIVATE KEY"
	}
	return t
}
