package compat

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// codecClient is one client of the cross-codec matrix: it writes topic
// cc-<name>-<codec> for every codec (content: codecContent) and reads back
// every topic any client wrote, reporting a digest per topic.
type codecClient struct {
	name  string
	ready func(t *testing.T) (bool, string)
	// write returns a result per codec ("write-<codec>").
	write func(t *testing.T, addr, prefix string) map[string]scenarioResult
	// read returns a result per topic ("read <topic>"), the digest as detail.
	read func(t *testing.T, addr string, topics []string) map[string]scenarioResult
}

func externalCodecClient(name string, ready func() (bool, string), dir string, argv func(group, addr, prefix string, rest ...string) []string) codecClient {
	return codecClient{
		name:  name,
		ready: func(*testing.T) (bool, string) { return ready() },
		write: func(t *testing.T, addr, prefix string) map[string]scenarioResult {
			a := argv("write-codecs", addr, prefix)
			res, _ := runScenarios(t, 2*time.Minute, dir, a[0], a[1:]...)
			return res
		},
		read: func(t *testing.T, addr string, topics []string) map[string]scenarioResult {
			a := argv("read-codecs", addr, "-", topics...)
			res, _ := runScenarios(t, 3*time.Minute, dir, a[0], a[1:]...)
			return res
		},
	}
}

var codecIDs = map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

func franzCodec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// digestLines hashes records given as key, value and "k=v,..." headers.
func digestLines(recs [][3]string) string {
	h := sha256.New()
	for _, r := range recs {
		fmt.Fprintf(h, "%s\t%s\t%s\n", r[0], r[1], r[2])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func franzGoCodecClient() codecClient {
	return codecClient{
		name:  "franz-go",
		ready: func(*testing.T) (bool, string) { return true, "" },
		write: func(t *testing.T, addr, prefix string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			for _, c := range codecNames {
				cl := newClient(t, addr, kgo.ProducerBatchCompression(franzCodec(c)), kgo.ProducerLinger(50*time.Millisecond))
				keys, values := codecContent("franz-go", c)
				var rs []*kgo.Record
				for i := range keys {
					rs = append(rs, &kgo.Record{Topic: prefix + "-" + c, Key: []byte(keys[i]), Value: []byte(values[i]),
						Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(c)}}})
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					out["write-"+c] = scenarioResult{"fail", err.Error()}
				} else {
					out["write-"+c] = scenarioResult{"pass", ""}
				}
				cancel()
				cl.Close()
			}
			return out
		},
		read: func(t *testing.T, addr string, topics []string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			for _, tp := range topics {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if ends := endOffsets(ctx, t, newAdmin(t, addr), tp); ends[0] != codecRecords {
					out["read "+tp] = scenarioResult{"fail", fmt.Sprintf("%d records, want %d", ends[0], codecRecords)}
					cancel()
					continue
				}
				got := consumeAll(ctx, t, addr, tp, map[int32]int64{0: codecRecords})[0]
				cancel()
				var recs [][3]string
				for _, r := range got {
					var hs []string
					for _, h := range r.Headers {
						hs = append(hs, h.Key+"="+string(h.Value))
					}
					recs = append(recs, [3]string{string(r.Key), string(r.Value), strings.Join(hs, ",")})
				}
				out["read "+tp] = scenarioResult{"pass", digestLines(recs)}
			}
			return out
		},
	}
}

func kcatCodecClient() codecClient {
	return codecClient{
		name: "kcat",
		ready: func(*testing.T) (bool, string) {
			_, err := exec.LookPath("kcat")
			return err == nil, "kcat"
		},
		write: func(t *testing.T, addr, prefix string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			for _, c := range codecNames {
				keys, values := codecContent("kcat", c)
				var in strings.Builder
				for i := range keys {
					fmt.Fprintf(&in, "%s\t%s\n", keys[i], values[i])
				}
				_, stderr := kcat(t, time.Minute, in.String(), "-b", addr, "-P", "-t", prefix+"-"+c, "-p", "0",
					"-K", "\t", "-H", "h="+c, "-z", c)
				if strings.Contains(stderr, "ERROR") || strings.Contains(stderr, "not compressing") {
					out["write-"+c] = scenarioResult{"fail", tail(stderr, 300)}
				} else {
					out["write-"+c] = scenarioResult{"pass", ""}
				}
			}
			return out
		},
		read: func(t *testing.T, addr string, topics []string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			for _, tp := range topics {
				stdout, _ := kcat(t, time.Minute, "", "-b", addr, "-C", "-q", "-t", tp, "-p", "0", "-o", "beginning", "-e",
					"-f", "%k\t%s\t%h\n")
				lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
				if len(lines) != codecRecords {
					out["read "+tp] = scenarioResult{"fail", fmt.Sprintf("read %d of %d", len(lines), codecRecords)}
					continue
				}
				h := sha256.Sum256([]byte(stdout))
				out["read "+tp] = scenarioResult{"pass", hex.EncodeToString(h[:])}
			}
			return out
		},
	}
}

// javaToolsCodecClient writes with kafka-console-producer (one JVM per
// codec) and reads every topic with one kafka-console-consumer (--include),
// sorting the records back to their topic by the writer/codec prefix of
// each value.
func javaToolsCodecClient(classpath *string) codecClient {
	const name = "java-tools"
	return codecClient{
		name: name,
		ready: func(t *testing.T) (bool, string) {
			return *classpath != "", "java, mvn and the compat-tests/java dependencies"
		},
		write: func(t *testing.T, addr, prefix string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			for _, c := range codecNames {
				keys, values := codecContent(name, c)
				var in strings.Builder
				for i := range keys {
					fmt.Fprintf(&in, "h:%s\t%s\t%s\n", c, keys[i], values[i])
				}
				stdout, err := runJavaTool(t, *classpath, in.String(), "org.apache.kafka.tools.ConsoleProducer",
					"--bootstrap-server", addr, "--topic", prefix+"-"+c, "--compression-codec", c,
					"--reader-property", "parse.key=true", "--reader-property", "parse.headers=true",
					"--reader-property", "key.separator=\t")
				if err != nil {
					out["write-"+c] = scenarioResult{"fail", err.Error() + ": " + tail(stdout, 300)}
				} else {
					out["write-"+c] = scenarioResult{"pass", ""}
				}
			}
			return out
		},
		read: func(t *testing.T, addr string, topics []string) map[string]scenarioResult {
			out := map[string]scenarioResult{}
			byPrefix := map[string]string{} // "writer/codec" -> topic
			for _, tp := range topics {
				w, c := splitCodecTopic(tp)
				byPrefix[w+"/"+c] = tp
			}
			stdout, err := runJavaTool(t, *classpath, "", "org.apache.kafka.tools.consumer.ConsoleConsumer",
				"--bootstrap-server", addr, "--include", "^("+strings.Join(topics, "|")+")$", "--from-beginning",
				"--max-messages", fmt.Sprint(codecRecords*len(topics)), "--timeout-ms", "20000",
				"--formatter-property", "print.key=true", "--formatter-property", "print.headers=true")
			recs := map[string][][3]string{}
			for _, line := range strings.Split(stdout, "\n") {
				f := strings.SplitN(line, "\t", 3)
				if len(f) != 3 {
					continue
				}
				parts := strings.SplitN(f[2], "/", 3)
				if len(parts) < 3 {
					continue
				}
				tp := byPrefix[parts[0]+"/"+parts[1]]
				recs[tp] = append(recs[tp], [3]string{f[1], f[2], strings.Replace(f[0], ":", "=", 1)})
			}
			for _, tp := range topics {
				rs := recs[tp]
				switch {
				case len(rs) != codecRecords:
					why := fmt.Sprintf("read %d of %d", len(rs), codecRecords)
					if err != nil {
						why += fmt.Sprintf(" (%v)", err)
					}
					out["read "+tp] = scenarioResult{"fail", why}
				default:
					out["read "+tp] = scenarioResult{"pass", digestLines(rs)}
				}
			}
			return out
		},
	}
}

// runJavaTool runs one main class of the Kafka tools jar in its own JVM.
func runJavaTool(t *testing.T, classpath, stdin, class string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "java", jvm(classpath, append([]string{class}, args...)...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	t.Logf("java %s %s: %v in %v; stderr (tail): %s", class, strings.Join(args, " "), err,
		time.Since(start).Round(time.Millisecond), tail(errb.String(), 2000))
	if err != nil {
		return out.String() + errb.String(), err
	}
	// The console consumer logs a failed poll and exits 0: report its
	// last "Caused by" as the error.
	if i := strings.LastIndex(errb.String(), "Caused by: "); i >= 0 {
		line, _, _ := strings.Cut(errb.String()[i:], "\n")
		return out.String(), fmt.Errorf("%s", line)
	}
	return out.String(), nil
}

// splitCodecTopic splits cc-<writer>-<codec>.
func splitCodecTopic(tp string) (writer, codec string) {
	s := strings.TrimPrefix(tp, "cc-")
	i := strings.LastIndex(s, "-")
	return s[:i], s[i+1:]
}

// TestMatrixCodecs: every client writes a topic per codec; the broker's
// view of each (kgo: content and the batch's compression attribute) is
// checked; then every client reads every topic back and its digest must
// match the content its writer was given. A client's cell for codec-<c> is
// pass when its own write of <c> checks out and it read every other
// client's <c> topic intact.
func TestMatrixCodecs(t *testing.T) {
	t.Parallel()
	var classpath string
	t.Run("java-build", func(t *testing.T) {
		if _, err := exec.LookPath("java"); err != nil {
			requireTool(t, "java")
		}
		requireTool(t, "mvn")
		classpath = buildJava(t)
	})
	clients := []codecClient{
		franzGoCodecClient(),
		saramaCodecClient(),
		kafkaGoCodecClient(),
		kcatCodecClient(),
		javaToolsCodecClient(&classpath),
		externalCodecClient("python-confluent-kafka", func() (bool, string) { return pythonHas("confluent_kafka"), "python3 with confluent_kafka" },
			filepath.Join(".", "python"), pythonArgv("confluent")),
		externalCodecClient("kafka-python", func() (bool, string) { return pythonHas("kafka"), "python3 with kafka-python" },
			filepath.Join(".", "python"), pythonArgv("kafka-python")),
		externalCodecClient(jsClient, func() (bool, string) { return jsReady(), "node with kafkajs" }, filepath.Join(".", "js"), jsArgv),
		{name: ckgClient, ready: func(t *testing.T) (bool, string) {
			bin, why := buildCkg(t)
			return bin != "", "a cgo build of confluent-kafka-go (" + why + ")"
		}},
	}
	ckgArgv := func(group, addr, prefix string, rest ...string) []string {
		bin, _ := buildCkg(t)
		return append([]string{bin, group, addr, prefix}, rest...)
	}
	ckc := externalCodecClient(ckgClient, nil, ".", ckgArgv)
	clients[len(clients)-1].write, clients[len(clients)-1].read = ckc.write, ckc.read

	codecScen := func(c string) string { return "codec-" + c }
	var scen []string
	for _, c := range codecNames {
		scen = append(scen, codecScen(c))
	}

	b := startBroker(t)
	adm := newAdmin(t, b.KafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Which clients can run here.
	var live []codecClient
	for _, c := range clients {
		if ok, what := c.ready(t); ok {
			live = append(live, c)
		} else {
			t.Run(c.name, func(t *testing.T) { requireToolMatrix(t, c.name, scen, false, what) })
		}
	}

	// problems[client][codec] collects why a cell fails; na[client][codec]
	// why it is not expressible.
	problems := map[string]map[string][]string{}
	na := map[string]map[string]string{}
	addProblem := func(client, codec, why string) {
		if problems[client] == nil {
			problems[client] = map[string][]string{}
		}
		problems[client][codec] = append(problems[client][codec], why)
	}
	setNA := func(client, codec, why string) {
		if na[client] == nil {
			na[client] = map[string]string{}
		}
		na[client][codec] = why
	}

	// Write, then check on the broker with kgo.
	written := map[string][]string{} // codec -> topics
	for _, c := range live {
		prefix := "cc-" + c.name
		for _, codec := range codecNames {
			createTopic(ctx, t, adm, prefix+"-"+codec, 1, nil)
		}
		start := time.Now()
		res := c.write(t, b.KafkaAddr, prefix)
		t.Logf("%s wrote its codec topics in %v", c.name, time.Since(start).Round(time.Millisecond))
		if v, ok := res["\x00version"]; ok {
			writeMatrix(matrixCell{Kind: "version", Client: c.name, Detail: v.detail, Test: t.Name()})
		}
		for _, codec := range codecNames {
			tp := prefix + "-" + codec
			r, ok := res["write-"+codec]
			switch {
			case !ok:
				why := "the writer printed no result"
				if e, ok := res["\x00error"]; ok {
					why = e.detail
				}
				addProblem(c.name, codec, "write: "+why)
				continue
			case r.result == "na":
				setNA(c.name, codec, r.detail)
				continue
			case r.result != "pass":
				addProblem(c.name, codec, "write: "+r.detail)
				continue
			}
			if why := checkCodecTopic(ctx, t, b.KafkaAddr, tp, c.name, codec); why != "" {
				addProblem(c.name, codec, "broker-side check of the write: "+why)
				continue
			}
			written[codec] = append(written[codec], tp)
		}
	}

	// Every client reads every topic that was written, concurrently.
	var all []string
	for _, codec := range codecNames {
		all = append(all, written[codec]...)
	}
	sort.Strings(all)
	var mu sync.Mutex
	var wg sync.WaitGroup
	reads := map[string]map[string]scenarioResult{}
	for _, c := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			res := c.read(t, b.KafkaAddr, all)
			t.Logf("%s read %d topics in %v", c.name, len(all), time.Since(start).Round(time.Millisecond))
			mu.Lock()
			reads[c.name] = res
			mu.Unlock()
		}()
	}
	wg.Wait()

	for _, c := range live {
		for _, tp := range all {
			writer, codec := splitCodecTopic(tp)
			r, ok := reads[c.name]["read "+tp]
			res, detail := "pass", ""
			switch {
			case !ok:
				res, detail = "fail", "the reader printed no result"
				if e, ok := reads[c.name]["\x00error"]; ok {
					detail = e.detail
				}
			case r.result == "na":
				res, detail = "na", r.detail
				setNA(c.name, codec, r.detail)
			case r.result != "pass":
				res, detail = "fail", r.detail
			case r.detail != codecDigest(writer, codec):
				res, detail = "fail", "content differs from what "+writer+" wrote"
			}
			writeMatrix(matrixCell{Kind: "xread", Client: c.name, Writer: writer, Codec: codec, Result: res, Detail: detail, Test: t.Name()})
			if res == "fail" {
				addProblem(c.name, codec, "reading "+writer+"'s topic: "+detail)
			}
		}
	}

	for _, c := range live {
		t.Run(c.name, func(t *testing.T) {
			for _, codec := range codecNames {
				switch {
				case len(problems[c.name][codec]) > 0:
					recordMatrix(t, c.name, codecScen(codec), "fail", strings.Join(problems[c.name][codec], "; "))
				case na[c.name][codec] != "":
					recordMatrix(t, c.name, codecScen(codec), "na", na[c.name][codec])
				default:
					recordMatrix(t, c.name, codecScen(codec), "pass", fmt.Sprintf("wrote %s; read it from %d writers", codec, len(written[codec])))
				}
			}
		})
	}
}

// checkCodecTopic reads a written codec topic with kgo and checks content
// and that every batch carries the codec's compression attribute.
func checkCodecTopic(ctx context.Context, t *testing.T, addr, topic, writer, codec string) string {
	t.Helper()
	if ends := endOffsets(ctx, t, newAdmin(t, addr), topic); ends[0] != codecRecords {
		return fmt.Sprintf("%d records, want %d", ends[0], codecRecords)
	}
	got := consumeAll(ctx, t, addr, topic, map[int32]int64{0: codecRecords})[0]
	keys, values := codecContent(writer, codec)
	if len(got) != codecRecords {
		return fmt.Sprintf("%d records, want %d", len(got), codecRecords)
	}
	for i, r := range got {
		if string(r.Key) != keys[i] || string(r.Value) != values[i] || len(r.Headers) != 1 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != codec {
			return fmt.Sprintf("offset %d: key %q, value %.40q, headers %s", r.Offset, r.Key, r.Value, fmtHeaders(r.Headers))
		}
		if ct := r.Attrs.CompressionType(); ct != codecIDs[codec] {
			return fmt.Sprintf("offset %d is in a batch with compression type %d, want %d (%s)", r.Offset, ct, codecIDs[codec], codec)
		}
	}
	return ""
}
