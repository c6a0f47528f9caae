package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Mutual TLS between Sluice's own processes (the replication and metastore
// ports). A node's certificate names it by a DNS subject alternative name
// "broker-<node.id>" (NodeName); it must carry both the serverAuth and the
// clientAuth extended key usages, since every node dials and accepts. The
// dialer asks for NodeName(peer) as the server name, so standard hostname
// verification checks that the answering node is the one it meant to
// reach; the acceptor checks the client certificate against the node id
// the connection declares (PeerNamesNode). A certificate proves which node
// holds it, so a peer can no longer claim another node's id, whatever
// address it connects from.

// NodeName is the DNS name a node's certificate carries: "broker-<id>".
func NodeName(id int64) string { return "broker-" + strconv.FormatInt(id, 10) }

// MetaName is the DNS name the certificate of the metadata quorum member
// with meta.id id carries: "meta-<id>". The metastore port identifies
// quorum members by it (a node with the meta role and a broker role
// carries both names).
func MetaName(id uint64) string { return "meta-" + strconv.FormatUint(id, 10) }

// InternalOptions are o for an internal port: a client certificate is
// required of every peer.
func InternalOptions(o Options) Options {
	o.ClientAuth = "required"
	return o
}

// Validate for an internal port: a trust store is required too.
func ValidateInternal(o Options) error {
	if err := InternalOptions(o).Validate(); err != nil {
		return err
	}
	if o.TruststoreLocation == "" && o.TruststoreCertificates == "" {
		return errors.New("mutual TLS needs a trust store (ssl.truststore.location or ssl.truststore.certificates)")
	}
	return nil
}

// Server runs the server side of a handshake on c, bounded by timeout,
// and returns the TLS connection; the peer's certificate has been checked
// against the trust store.
func (l *Loader) Server(c net.Conn, timeout time.Duration) (*tls.Conn, error) {
	tc := tls.Server(c, l.ServerConfig())
	return tc, handshakeWithin(tc, timeout)
}

// DialPeer runs the client side of a handshake on c with the node it means
// to reach, bounded by timeout: the server's certificate must be signed by
// the trust store and name node peer.
func (l *Loader) DialPeer(c net.Conn, peer int64, timeout time.Duration) (*tls.Conn, error) {
	return l.DialName(c, NodeName(peer), timeout)
}

// DialName is DialPeer for a peer the certificate of which must carry the
// DNS name name.
func (l *Loader) DialName(c net.Conn, name string, timeout time.Duration) (*tls.Conn, error) {
	tc := tls.Client(c, l.ClientConfig(name))
	return tc, handshakeWithin(tc, timeout)
}

// DialAny is DialPeer for a peer whose name the dialer does not know (a
// broker dialing the metastore's addresses): the server's certificate must
// be signed by the trust store, and check must accept it.
func (l *Loader) DialAny(c net.Conn, timeout time.Duration, check func(*x509.Certificate) error) (*tls.Conn, error) {
	cfg := l.ClientConfig("")
	roots := cfg.RootCAs
	// Verification is done here, without a host name, instead of by
	// crypto/tls, which needs one.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("no server certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return err
		}
		return check(cs.PeerCertificates[0])
	}
	tc := tls.Client(c, cfg)
	return tc, handshakeWithin(tc, timeout)
}

func handshakeWithin(tc *tls.Conn, timeout time.Duration) error {
	_ = tc.SetDeadline(time.Now().Add(timeout))
	err := tc.Handshake()
	_ = tc.SetDeadline(time.Time{})
	return err
}

// PeerNamesNode reports whether the verified certificate of the peer of cs
// names node id (NodeName); the error says what it names instead.
func PeerNamesNode(cs tls.ConnectionState, id int64) error {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return errors.New("no verified peer certificate")
	}
	return CertNamesNode(cs.PeerCertificates[0], id)
}

// CertNamesNode reports whether cert names node id (NodeName).
func CertNamesNode(cert *x509.Certificate, id int64) error {
	if id < 0 {
		return fmt.Errorf("node id %d", id)
	}
	return CertNames(cert, NodeName(id))
}

// CertNamesMeta reports whether cert names some metadata quorum member
// (MetaName).
func CertNamesMeta(cert *x509.Certificate) error {
	for _, n := range cert.DNSNames {
		if id, ok := strings.CutPrefix(n, "meta-"); ok {
			if v, err := strconv.ParseUint(id, 10, 64); err == nil && v > 0 {
				return nil
			}
		}
	}
	return fmt.Errorf("certificate (subject %q, DNS names %v) names no metastore node (meta-<id>)", cert.Subject.String(), cert.DNSNames)
}

// CertNames reports whether cert carries the DNS name want.
func CertNames(cert *x509.Certificate, want string) error {
	for _, n := range cert.DNSNames {
		if n == want {
			return nil
		}
	}
	return fmt.Errorf("certificate (subject %q, DNS names %v) does not name %s", cert.Subject.String(), cert.DNSNames, want)
}
