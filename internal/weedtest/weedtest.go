// Package weedtest starts SeaweedFS's weed, a real S3-compatible server, on
// loopback for the tests that need one (the objstore S3 backend, brokers in
// shared-storage mode over S3): a master, a volume server, a filer and the
// S3 gateway in one process, with a data directory and one identity of its
// own. The binary is built from SeaweedFS's Go module by the Makefile (see
// WEED_VERSION there); the tests name it through SLUICE_WEED and carry the
// build tag s3.
package weedtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The identity weed accepts.
const (
	AccessKey = "sluice-test"
	SecretKey = "sluice-test-secret"
)

// Server is a running weed.
type Server struct {
	// Endpoint is the host:port of its S3 gateway (plain HTTP; path-style
	// bucket addressing).
	Endpoint string
	dir      string
	cmd      *exec.Cmd
	logf     *os.File
}

// Start runs the weed binary bin and returns once its S3 gateway serves:
// bucket exists (it is created) and an object can be written into it (the
// gateway listens before the filer and the volume server are ready). On a
// loaded two-core machine that can take minutes.
func Start(bin, bucket string) (*Server, error) {
	dir, err := os.MkdirTemp("", "weed-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	fail := func(err error) (*Server, error) {
		s.Close()
		return nil, err
	}
	cfg := fmt.Sprintf(`{"identities":[{"name":"sluice","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`,
		AccessKey, SecretKey)
	cfgPath := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return fail(err)
	}
	ports, err := LoopbackPorts(8)
	if err != nil {
		return fail(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		return fail(err)
	}
	args := []string{
		"server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir=" + data,
		"-master.port=" + strconv.Itoa(ports[0]), "-master.port.grpc=" + strconv.Itoa(ports[1]),
		"-volume.port=" + strconv.Itoa(ports[2]), "-volume.port.grpc=" + strconv.Itoa(ports[3]),
		"-filer", "-filer.port=" + strconv.Itoa(ports[4]), "-filer.port.grpc=" + strconv.Itoa(ports[5]),
		"-s3", "-s3.port=" + strconv.Itoa(ports[6]), "-s3.port.grpc=" + strconv.Itoa(ports[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config=" + cfgPath,
		"-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=0",
	}
	s.logf, err = os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		return fail(err)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.logf, s.logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fail(fmt.Errorf("start weed: %w", err))
	}
	s.Endpoint = "127.0.0.1:" + strconv.Itoa(ports[6])
	cl, err := minio.New(s.Endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = cl.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
		if err != nil {
			if exists, e := cl.BucketExists(ctx, bucket); e == nil && exists {
				err = nil
			}
		}
		if err == nil {
			_, err = cl.PutObject(ctx, bucket, "ready", bytes.NewReader([]byte("ready")), 5, minio.PutObjectOptions{})
		}
		cancel()
		if err == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "weed.log"))
			if len(log) > 4000 {
				log = log[len(log)-4000:]
			}
			return fail(fmt.Errorf("weed did not serve S3 on %s within 3 minutes: %v\n%s", s.Endpoint, err, log))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Close kills weed (its whole process group) and removes its data.
func (s *Server) Close() {
	if s.cmd != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck
		s.cmd.Wait()                                      //nolint:errcheck
	}
	if s.logf != nil {
		s.logf.Close()
	}
	os.RemoveAll(s.dir)
}

// LoopbackPorts returns n distinct ports free on 127.0.0.1 now, below the
// kernel's ephemeral range, so that no outgoing connection takes one before
// weed binds it.
func LoopbackPorts(n int) ([]int, error) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				lo = v
			}
		}
	}
	if lo <= 11000 {
		return nil, fmt.Errorf("the ephemeral port range starts at %d: no room below it", lo)
	}
	var r [4]byte
	var ports []int
	seen := map[int]bool{}
	for tries := 0; len(ports) < n && tries < 1000; tries++ {
		if _, err := rand.Read(r[:]); err != nil {
			return nil, err
		}
		p := 10000 + int(uint32(r[0])<<8|uint32(r[1]))%(lo-11000)
		if seen[p] {
			continue
		}
		seen[p] = true
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, errors.New("no free loopback ports")
	}
	return ports, nil
}
