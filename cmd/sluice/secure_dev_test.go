package main

import (
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// secureDev is one `sluice dev --secure` process of a test, in a
// temporary directory of its own: data is its data directory (the CA
// --secure generates is tls/ca.crt there), dir also holds its log and
// whatever files the test writes.
type secureDev struct {
	dir, data, admin string
	p                *proc
}

// newSecureDev prepares a secureDev with its admin port on admin; the
// process, once started, is killed at the end of the test, and its log's
// tail shown if the test failed.
func newSecureDev(t *testing.T, admin string) *secureDev {
	t.Helper()
	dir := t.TempDir()
	lf, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	d := &secureDev{dir: dir, data: filepath.Join(dir, "data"), admin: admin, p: &proc{name: "dev", admin: admin, logf: lf}}
	t.Cleanup(func() {
		d.p.kill()
		if t.Failed() {
			b, _ := os.ReadFile(lf.Name())
			t.Logf("node log tail:\n%s", tail(b, 4000))
		}
	})
	return d
}

// start runs `sluice dev --secure` with environment env and args after
// the data directory and admin address (listeners, --set flags). It does
// not wait for the node to be ready.
func (d *secureDev) start(t *testing.T, env []string, args ...string) {
	t.Helper()
	d.p.cmd = exec.Command(binPath, append([]string{"dev", "--secure", "--data-dir", d.data, "--admin-addr", d.admin}, args...)...)
	d.p.cmd.Env = env
	d.p.cmd.Stdout, d.p.cmd.Stderr = d.p.logf, d.p.logf
	if err := d.p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

// caFile is the CA --secure generated (it signs the Kafka listeners'
// certificate), and caPool that CA as a pool clients trust.
func (d *secureDev) caFile() string { return filepath.Join(d.data, "tls", "ca.crt") }

func (d *secureDev) caPool(t *testing.T) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(d.caFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}
