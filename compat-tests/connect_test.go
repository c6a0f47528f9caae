package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// A Kafka Connect 4.4 distributed worker (ConnectDistributed from
// connect-runtime 4.4.0, on the java/ classpath) against one `sluice dev`:
// the worker creates its three internal topics (compacted, as Connect
// requires of them), a file source connector copies a file into a topic and
// a file sink connector copies that topic into another file (java/'s
// LineFileSource and LineFileSink, which do what Kafka's FileStream
// connectors do: connect-file 4.4.0 cannot be fetched here, and 4.3.1's
// classes do not link against the 4.4.0 clients);
// after a clean stop and restart of the worker the connectors resume from
// the offsets they committed to Sluice (source offsets in the offsets
// topic, the sink's in its consumer group).

const (
	connectGroup     = "sluice-connect"
	connectConfigs   = "connect-configs"
	connectOffsets   = "connect-offsets"
	connectStatus    = "connect-status"
	connectTopic     = "connect-lines"
	connectSource    = "file-source"
	connectSink      = "file-sink"
	connectSinkGroup = "connect-" + connectSink // Connect's default group of a sink connector
)

// connectWorker is one ConnectDistributed JVM.
type connectWorker struct {
	t     *testing.T
	cp    string
	props string
	rest  string // http://127.0.0.1:port
	log   string
	cmd   *exec.Cmd
	done  chan error
}

func (w *connectWorker) start() {
	w.t.Helper()
	logf, err := os.OpenFile(w.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		w.t.Fatal(err)
	}
	fmt.Fprintf(logf, "==== worker start %s\n", time.Now().Format(time.RFC3339Nano))
	w.cmd = exec.Command("java", jvm(w.cp, "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
		"org.apache.kafka.connect.cli.ConnectDistributed", w.props)...)
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		logf.Close()
		w.t.Fatal(err)
	}
	done := make(chan error, 1)
	w.done = done
	cmd := w.cmd
	go func() { done <- cmd.Wait(); logf.Close() }()
	// The REST server answers once the worker has joined its group and
	// read the config topic; a worker that exits early fails the test.
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(w.rest + "/connectors")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-done:
			done <- err
			w.t.Fatalf("the Connect worker exited before its REST API answered: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the Connect worker's REST API did not answer within 60s (last error %v)", err)
		}
	}
}

// stop sends SIGTERM, Connect's clean shutdown (tasks stopped, source
// offsets flushed, sink offsets committed), and waits for the JVM to exit.
func (w *connectWorker) stop() {
	w.t.Helper()
	if w.cmd == nil {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-w.done:
		// A JVM ended by SIGTERM after its shutdown hooks exits with 143.
		if err != nil && !strings.Contains(err.Error(), "exit status 143") {
			w.t.Errorf("the Connect worker exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
		w.t.Errorf("the Connect worker did not exit within 30s of SIGTERM")
	}
	w.cmd = nil
}

func (w *connectWorker) request(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, w.rest+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	cl := &http.Client{Timeout: 20 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// fileLines returns the complete lines of a file (a last line without its
// newline is still being written and is left out).
func fileLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return nil
	}
	return strings.Split(s, "\n")
}

func appendLines(t *testing.T, path string, from, to int) []string {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := from; i < to; i++ {
		l := fmt.Sprintf("line-%04d %s", i, strings.Repeat("x", i%17))
		lines = append(lines, l)
		fmt.Fprintln(f, l)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestConnectDistributedFileStream: see the file comment. What is asserted
// after the restart is exactly the N+M source lines in order, no duplicate:
// Connect is at-least-once, and a duplicate is allowed only for records
// whose offsets were not committed before the worker stopped. The test
// stops the worker only after it has seen both commits reach Sluice (the
// sink group's committed offset is N; the source connector's offset, read
// back from the offsets topic through the REST API, is the file's length),
// so nothing may be redelivered: a duplicate would mean Sluice lost or
// misreported a commit. The data topic's end offset N+M checks the same
// on the produce side.
func TestConnectDistributedFileStream(t *testing.T) {
	t.Parallel()
	requireTool(t, "java")
	requireTool(t, "mvn")
	cp := buildJava(t)
	const n, m = 200, 50
	testStart := time.Now()

	b := startBroker(t, autoCreateOff().ExtraArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := newAdmin(t, b.KafkaAddr)
	createTopic(ctx, t, adm, connectTopic, 1, nil)

	dir := t.TempDir()
	src, dst := filepath.Join(dir, "source.txt"), filepath.Join(dir, "sink.txt")
	want := appendLines(t, src, 0, n)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	props := filepath.Join(dir, "worker.properties")
	cfg := strings.Join([]string{
		"bootstrap.servers=" + b.KafkaAddr,
		"group.id=" + connectGroup,
		"config.storage.topic=" + connectConfigs,
		"offset.storage.topic=" + connectOffsets,
		"status.storage.topic=" + connectStatus,
		"config.storage.replication.factor=1",
		"offset.storage.replication.factor=1",
		"status.storage.replication.factor=1",
		"key.converter=org.apache.kafka.connect.storage.StringConverter",
		"value.converter=org.apache.kafka.connect.storage.StringConverter",
		"listeners=http://127.0.0.1:" + strconv.Itoa(port),
		"rest.advertised.host.name=127.0.0.1",
		// Commit source offsets every second rather than every minute,
		// so that the test sees them in the offsets topic quickly.
		"offset.flush.interval.ms=1000",
		// One worker that comes back: no reason to hold its connectors
		// back waiting for the lost worker (default five minutes).
		"scheduled.rebalance.max.delay.ms=0",
		// Plugins from their ServiceLoader manifests, without a
		// reflective scan of the whole classpath at every start.
		"plugin.discovery=service_load",
	}, "\n") + "\n"
	if err := os.WriteFile(props, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	w := &connectWorker{t: t, cp: cp, props: props, rest: "http://127.0.0.1:" + strconv.Itoa(port), log: filepath.Join(dir, "worker.log")}
	t.Cleanup(func() {
		w.stop()
		if t.Failed() {
			if b, err := os.ReadFile(w.log); err == nil {
				t.Logf("Connect worker log (tail):\n%s", tail(string(b), 24<<10))
			}
		}
	})
	w.start()
	t.Logf("worker up after %v", time.Since(testStart).Round(time.Millisecond))

	for _, c := range []struct {
		name string
		cfg  map[string]string
	}{
		{connectSource, map[string]string{
			"connector.class": "dev.sluice.compat.connect.LineFileSourceConnector",
			"tasks.max":       "1", "file": src, "topic": connectTopic,
		}},
		{connectSink, map[string]string{
			"connector.class": "dev.sluice.compat.connect.LineFileSinkConnector",
			"tasks.max":       "1", "file": dst, "topics": connectTopic,
		}},
	} {
		code, body, err := w.request(http.MethodPost, "/connectors", map[string]any{"name": c.name, "config": c.cfg})
		if err != nil || code != http.StatusCreated {
			t.Fatalf("POST /connectors %s: %d %s %v", c.name, code, body, err)
		}
	}

	waitLines := func(want []string, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			got := fileLines(t, dst)
			if len(got) >= len(want) {
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("sink file has %d lines, want exactly the %d source lines in order; first difference %s",
						len(got), len(want), firstDiff(got, want))
				}
				return
			}
			if time.Now().After(deadline) {
				st, body, _ := w.request(http.MethodGet, "/connectors?expand=status", nil)
				t.Fatalf("sink file has %d of %d lines after %v; connector status %d %s", len(got), len(want), d, st, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitLines(want, 40*time.Second)
	t.Logf("sink has the first %d lines after %v", n, time.Since(testStart).Round(time.Millisecond))

	srcSize := func() int64 {
		st, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	// Both commits on Sluice before the stop (see the test's comment).
	waitFor(t, 20*time.Second, "the sink group's committed offset and the source offset to reach the end", func() bool {
		return committedSink(ctx, adm) == n && sourcePosition(w) == srcSize()
	})

	w.stop()
	want = append(want, appendLines(t, src, n, n+m)...)
	w.start()
	waitLines(want, 40*time.Second)
	t.Logf("sink has all %d lines after the restart, %v after the start", n+m, time.Since(testStart).Round(time.Millisecond))
	// Everything committed again: the sink flushes its file before it
	// commits, so once its group's offset is N+M every record it consumed
	// since the restart is in the file, and a duplicate would show below.
	waitFor(t, 20*time.Second, "both commits to reach the end of the appended file", func() bool {
		return committedSink(ctx, adm) == n+m && sourcePosition(w) == srcSize()
	})
	if got := fileLines(t, dst); len(got) != n+m {
		t.Fatalf("sink file has %d lines, want %d", len(got), n+m)
	}
	ends, err := adm.ListEndOffsets(ctx, connectTopic)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := ends.Lookup(connectTopic, 0); !ok || o.Err != nil || o.Offset != n+m {
		t.Fatalf("%s end offset %+v, want %d (one record per line, no duplicate)", connectTopic, o, n+m)
	}

	// The internal topics the worker created, with Connect's default
	// partition counts (config topic: always one) and compacted, as Connect
	// requires (it checks that itself, and refuses to start otherwise).
	tds, err := adm.ListTopics(ctx, connectConfigs, connectOffsets, connectStatus)
	if err != nil {
		t.Fatal(err)
	}
	for topic, parts := range map[string]int{connectConfigs: 1, connectOffsets: 25, connectStatus: 5} {
		td, ok := tds[topic]
		if !ok || td.Err != nil || len(td.Partitions) != parts {
			t.Errorf("%s: %d partitions (err %v, listed %v), want %d", topic, len(td.Partitions), td.Err, ok, parts)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, connectConfigs, connectOffsets, connectStatus)
	if err != nil {
		t.Fatal(err)
	}
	if len(rcs) != 3 {
		t.Fatalf("DescribeConfigs returned %d topics, want 3", len(rcs))
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("DescribeConfigs %s: %v", rc.Name, rc.Err)
		}
		policy := ""
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" {
				policy = c.MaybeValue()
			}
		}
		if policy != "compact" {
			t.Errorf("%s cleanup.policy = %q, want compact", rc.Name, policy)
		}
	}
	t.Logf("done in %v", time.Since(testStart).Round(time.Millisecond))
}

// committedSink is the sink connector's committed offset of the data
// topic's partition 0; -1 when none.
func committedSink(ctx context.Context, adm *kadm.Client) int64 {
	offs, err := adm.FetchOffsets(ctx, connectSinkGroup)
	if err != nil {
		return -1
	}
	o, ok := offs.Lookup(connectTopic, 0)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}

// sourcePosition is the file source's committed position (bytes) in
// the offsets topic, through GET /connectors/NAME/offsets; -1 when none.
func sourcePosition(w *connectWorker) int64 {
	code, body, err := w.request(http.MethodGet, "/connectors/"+connectSource+"/offsets", nil)
	if err != nil || code != http.StatusOK {
		return -1
	}
	var r struct {
		Offsets []struct {
			Offset map[string]json.Number `json:"offset"`
		} `json:"offsets"`
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&r); err != nil || len(r.Offsets) != 1 {
		return -1
	}
	p, err := r.Offsets[0].Offset["position"].Int64()
	if err != nil {
		return -1
	}
	return p
}

func firstDiff(got, want []string) string {
	for i := range got {
		if i >= len(want) {
			return fmt.Sprintf("line %d %q beyond the %d wanted", i+1, got[i], len(want))
		}
		if got[i] != want[i] {
			return fmt.Sprintf("line %d %q, want %q", i+1, got[i], want[i])
		}
	}
	return "none"
}
