// Package s3test starts a real S3-compatible server on loopback for the
// tests that need one (the objstore S3 backend, brokers in shared-storage
// mode over S3), with a data directory, one bucket and one identity of its
// own. Two servers are supported, both real implementations of the S3 API
// that other projects run:
//
//   - S3Proxy (gaul/s3proxy), a Java server over a local directory, run
//     from its jar with dependencies, which `make test-setup` fetches from
//     Maven Central like the compat suite's jars; it starts in about a
//     second, so `make test` uses it (SLUICE_S3PROXY_JAR names the jar).
//   - SeaweedFS's weed (a master, a volume server, a filer and the S3
//     gateway in one process), built from its Go module by the Makefile
//     (WEED_VERSION); `make test-s3` and the shared-storage benchmark use
//     it (SLUICE_WEED names the binary).
//
// FromEnv starts the one the environment names.
package s3test

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

// The identity the servers accept.
const (
	AccessKey = "sluice-test"
	SecretKey = "sluice-test-secret"
)

// Server is a running S3 server.
type Server struct {
	// Endpoint is the host:port of its S3 gateway (plain HTTP; path-style
	// bucket addressing).
	Endpoint string
	dir      string
	cmd      *exec.Cmd
	logf     *os.File
}

// StartWeed runs the weed binary bin and returns once its S3 gateway
// serves: bucket exists (it is created) and an object can be written into
// it (the gateway listens before the filer and the volume server are
// ready). On a loaded two-core machine that can take minutes.
func StartWeed(bin, bucket string) (*Server, error) {
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
	return s.serve("weed", bin, args, "127.0.0.1:"+strconv.Itoa(ports[6]), bucket, 3*time.Minute)
}

// StartS3Proxy runs S3Proxy from jar (a jar with its dependencies) with
// the java on PATH, or JAVA_HOME's, storing objects in a directory of its
// own (jclouds' filesystem-nio2 provider), and returns once bucket exists
// and takes an object.
func StartS3Proxy(jar, bucket string) (*Server, error) {
	dir, err := os.MkdirTemp("", "s3proxy-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	ports, err := LoopbackPorts(1)
	if err != nil {
		s.Close()
		return nil, err
	}
	endpoint := "127.0.0.1:" + strconv.Itoa(ports[0])
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		s.Close()
		return nil, err
	}
	props := strings.Join([]string{
		"s3proxy.endpoint=http://" + endpoint,
		"s3proxy.authorization=aws-v2-or-v4",
		"s3proxy.identity=" + AccessKey,
		"s3proxy.credential=" + SecretKey,
		"jclouds.provider=filesystem-nio2",
		"jclouds.filesystem.basedir=" + data,
	}, "\n") + "\n"
	propsPath := filepath.Join(dir, "s3proxy.conf")
	if err := os.WriteFile(propsPath, []byte(props), 0o600); err != nil {
		s.Close()
		return nil, err
	}
	java := "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = filepath.Join(home, "bin", "java")
	}
	return s.serve("s3proxy", java, []string{"-Xmx256m", "-jar", jar, "--properties", propsPath}, endpoint, bucket, 2*time.Minute)
}

// FromEnv starts the server the environment names: weed if SLUICE_WEED
// names its binary (`make test-s3`), else S3Proxy if SLUICE_S3PROXY_JAR
// names its jar (`make test`). missing says why neither can run, for the
// caller's skip; err is a server that did not start.
func FromEnv(bucket string) (s *Server, missing string, err error) {
	if bin := os.Getenv("SLUICE_WEED"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Sprintf("SLUICE_WEED=%s: %v (make test-s3 builds it)", bin, err), nil
		}
		s, err := StartWeed(bin, bucket)
		return s, "", err
	}
	jar := os.Getenv("SLUICE_S3PROXY_JAR")
	if jar == "" {
		return nil, "no S3 server: SLUICE_S3PROXY_JAR is not set (make test fetches S3Proxy's jar and names it; make test-s3 builds weed)", nil
	}
	if _, err := os.Stat(jar); err != nil {
		return nil, fmt.Sprintf("SLUICE_S3PROXY_JAR=%s: %v (make test-setup fetches it)", jar, err), nil
	}
	s, err = StartS3Proxy(jar, bucket)
	return s, "", err
}

// serve starts name (program with args) logging into the server's
// directory, and waits up to within until bucket exists at endpoint (it
// is created) and takes an object.
func (s *Server) serve(name, program string, args []string, endpoint, bucket string, within time.Duration) (*Server, error) {
	fail := func(err error) (*Server, error) {
		s.Close()
		return nil, err
	}
	logPath := filepath.Join(s.dir, name+".log")
	var err error
	s.logf, err = os.Create(logPath)
	if err != nil {
		return fail(err)
	}
	s.cmd = exec.Command(program, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.logf, s.logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.cmd = nil
		return fail(fmt.Errorf("start %s: %w", name, err))
	}
	s.Endpoint = endpoint
	cl, err := minio.New(s.Endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(within)
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
			log, _ := os.ReadFile(logPath)
			if len(log) > 4000 {
				log = log[len(log)-4000:]
			}
			return fail(fmt.Errorf("%s did not serve S3 on %s within %v: %v\n%s", name, s.Endpoint, within, err, log))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Close kills the server (its whole process group) and removes its data.
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
// the server binds it.
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
