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
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestAdminHTTPRequireAuth: `sluice dev --secure` (admin.http.require.auth
// on) on a loopback admin address. The guarded endpoints and pprof.listen
// refuse a request without credentials (401; before the key, loopback was
// enough), a wrong password (401) and a SCRAM user who is not a super user
// (403), and serve the bootstrap super user's HTTP basic credentials;
// `sluice meta backup` authenticates with SLUICE_ADMIN_HTTP_USER. /metrics
// and /readyz stay open.
func TestAdminHTTPRequireAuth(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 3)
	kafka, admin, pp := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2])
	data := filepath.Join(dir, "data")
	lf, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath, "dev", "--secure", "--data-dir", data, "--admin-addr", admin, "--kafka-addr", kafka,
		"--set", "pprof.listen="+pp)
	cmd.Env = append(os.Environ(), "SLUICE_BOOTSTRAP_USER=admin:admin-pw")
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: "dev", admin: admin, cmd: cmd, logf: lf}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(lf.Name())
			t.Logf("node log tail:\n%s", tail(b, 4000))
		}
	})
	waitReady(t, admin, 60*time.Second)

	// bob: a SCRAM user, not a super user.
	pem, err := os.ReadFile(filepath.Join(data, "tls", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-pw"}})
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

	backup := filepath.Join(dir, "meta.backup")
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
