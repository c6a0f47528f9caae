package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/internal/tlsconfig/pkitest"
)

// TestAdminHTTPRequireAuth: `sluice dev --secure` (admin.http.require.auth
// on) on a loopback admin address. The guarded endpoints and pprof.listen
// refuse a request without credentials (401; before the key, loopback was
// enough), a wrong password (401) and a SCRAM user who is not a super user
// (403), and serve the bootstrap super user's HTTP basic credentials;
// `sluice meta backup` authenticates with SLUICE_ADMIN_HTTP_USER. /metrics
// and /readyz stay open.
func TestAdminHTTPRequireAuth(t *testing.T) {
	ports := freePorts(t, 3)
	kafka, admin, pp := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2])
	d := newSecureDev(t, admin)
	d.start(t, append(os.Environ(), "SLUICE_BOOTSTRAP_USER=admin:admin-pw"), "--kafka-addr", kafka, "--set", "pprof.listen="+pp)
	waitReady(t, admin, 60*time.Second)

	// bob: a SCRAM user, not a super user.
	adm := scramAdmin(t, kafka, "admin", "admin-pw", kgo.DialTLSConfig(&tls.Config{RootCAs: d.caPool(t)}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"}})
	if err != nil || up["bob"].Err != nil {
		t.Fatalf("creating bob: %v %v", err, up)
	}

	do := func(method, url, user, pass string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Decommissioning a broker that does not exist: 404 once past the
	// guard, so nothing changes whatever the answer.
	decom := "http://" + admin + "/brokers/999/decommission"
	for _, c := range []struct {
		name, method, url, user, pass string
		want                          int
	}{
		{"no credentials", http.MethodPost, decom, "", "", http.StatusUnauthorized},
		{"wrong password", http.MethodPost, decom, "admin", "nope", http.StatusUnauthorized},
		{"unknown user", http.MethodPost, decom, "mallory", "x", http.StatusUnauthorized},
		{"not a super user", http.MethodPost, decom, "bob", "bob-pw", http.StatusForbidden},
		{"super user", http.MethodPost, decom, "admin", "admin-pw", http.StatusNotFound},
		{"backup without credentials", http.MethodGet, "http://" + admin + "/meta/backup", "", "", http.StatusUnauthorized},
		{"voters without credentials", http.MethodDelete, "http://" + admin + "/meta/voters/7", "", "", http.StatusUnauthorized},
		{"pprof without credentials", http.MethodGet, "http://" + pp + "/debug/pprof/", "", "", http.StatusUnauthorized},
		{"pprof, not a super user", http.MethodGet, "http://" + pp + "/debug/pprof/", "bob", "bob-pw", http.StatusForbidden},
		{"pprof, super user", http.MethodGet, "http://" + pp + "/debug/pprof/", "admin", "admin-pw", http.StatusOK},
		{"metrics open", http.MethodGet, "http://" + admin + "/metrics", "", "", http.StatusOK},
		{"readyz open", http.MethodGet, "http://" + admin + "/readyz", "", "", http.StatusOK},
		{"meta status open", http.MethodGet, "http://" + admin + "/meta/status", "", "", http.StatusOK},
	} {
		if got := do(c.method, c.url, c.user, c.pass); got != c.want {
			t.Errorf("%s: %s %s: %d, want %d", c.name, c.method, c.url, got, c.want)
		}
	}

	backup := filepath.Join(d.dir, "meta.backup")
	run := func(env string) error {
		c := exec.Command(binPath, "meta", "backup", backup, "--admin", admin)
		c.Env = append(os.Environ(), env)
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := run("SLUICE_ADMIN_HTTP_USER=bob:bob-pw"); err == nil {
		t.Error("sluice meta backup as bob (not a super user) succeeded")
	}
	if err := run("SLUICE_ADMIN_HTTP_USER=admin:admin-pw"); err != nil {
		t.Errorf("sluice meta backup as admin: %v", err)
	}
	if fi, err := os.Stat(backup); err != nil || fi.Size() == 0 {
		t.Errorf("no backup written: %v", err)
	}
}

// TestAdminHTTPTLS: the admin port with its own TLS keys
// (admin.http.ssl.*, client certificates requested) under
// `sluice dev --secure`. Plain HTTP is not served; /readyz answers over
// HTTPS without a certificate; a client certificate whose subject is a
// super user (super.users=User:CN=ops) passes the guard without a
// password, one of another subject gets 403, no certificate and no
// credentials 401, the bootstrap user's basic credentials still pass;
// `sluice meta backup --admin https://...` trusts SLUICE_ADMIN_HTTP_CA and
// presents SLUICE_ADMIN_HTTP_CERT.
func TestAdminHTTPTLS(t *testing.T) {
	ports := freePorts(t, 2)
	kafka, admin := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	d := newSecureDev(t, admin)
	dir := d.dir
	ca := pkitest.NewCA(t, "admin CA")
	caFile := pkitest.Write(t, dir, "admin-ca.crt", ca.PEM())
	serverPEM := pkitest.Write(t, dir, "admin.pem", ca.Issue(t, "sluice-admin", "127.0.0.1"))
	opsPEM := pkitest.Write(t, dir, "ops.pem", ca.Issue(t, "ops"))
	intruderPEM := pkitest.Write(t, dir, "intruder.pem", ca.Issue(t, "intruder"))
	d.start(t, append(os.Environ(), "SLUICE_BOOTSTRAP_USER=admin:admin-pw"), "--kafka-addr", kafka,
		"--set", "admin.http.ssl.keystore.location="+serverPEM,
		"--set", "admin.http.ssl.truststore.location="+caFile,
		"--set", "admin.http.ssl.client.auth=requested",
		"--set", "super.users=User:CN=ops")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM())
	client := func(certFile string) *http.Client {
		tc := &tls.Config{RootCAs: pool}
		if certFile != "" {
			c, err := tls.LoadX509KeyPair(certFile, certFile)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	}
	base := "https://" + admin
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client("").Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz over HTTPS not ready: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + admin + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the TLS admin port answered plain HTTP")
		}
	}
	do := func(cl *http.Client, user, pass string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/brokers/999/decommission", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name       string
		cert, user string
		want       int
	}{
		{"no certificate, no credentials", "", "", http.StatusUnauthorized},
		{"certificate of a super user", opsPEM, "", http.StatusNotFound},
		{"certificate of another subject", intruderPEM, "", http.StatusForbidden},
		{"no certificate, super user's password", "", "admin", http.StatusNotFound},
	} {
		if got := do(client(c.cert), c.user, "admin-pw"); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	backup := filepath.Join(dir, "meta.backup")
	bc := exec.Command(binPath, "meta", "backup", backup, "--admin", base)
	bc.Env = append(os.Environ(), "SLUICE_ADMIN_HTTP_CA="+caFile, "SLUICE_ADMIN_HTTP_CERT="+opsPEM)
	if out, err := bc.CombinedOutput(); err != nil {
		t.Errorf("sluice meta backup over HTTPS with the ops certificate: %v: %s", err, out)
	}
}
