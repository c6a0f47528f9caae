package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
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
	cfg := l.ClientConfig(NodeName(peer))
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
	want := NodeName(id)
	for _, n := range cert.DNSNames {
		if n == want {
			return nil
		}
	}
	return fmt.Errorf("certificate (subject %q, DNS names %v) does not name %s", cert.Subject.String(), cert.DNSNames, want)
}
