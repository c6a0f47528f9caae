// Command compatmatrix renders docs/compat.md, the client × scenario matrix,
// from one run of the compat suite (`make compat`):
//
//	compatmatrix -cells DIR/cells.jsonl -json DIR/test.json -out docs/compat.md
//
// cells.jsonl holds the cells the matrix tests recorded (SLUICE_COMPAT_MATRIX_DIR);
// test.json is `go test -json` of the whole suite. A cell no matrix test
// records (most of franz-go's, group-commit-resume of sarama and kafka-go,
// kcat's group cells, the Java client's codec cells) comes from the outcome of the existing tests that
// cover the scenario (the coverage table below); a cell no test covers
// says so.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

type cell struct {
	Kind     string `json:"kind"`
	Client   string `json:"client"`
	Scenario string `json:"scenario"`
	Result   string `json:"result"`
	Detail   string `json:"detail"`
	Writer   string `json:"writer"`
	Codec    string `json:"codec"`
	Test     string `json:"test"`
}

type testEvent struct {
	Action  string  `json:"Action"`
	Test    string  `json:"Test"`
	Package string  `json:"Package"`
	Elapsed float64 `json:"Elapsed"`
	Output  string  `json:"Output"`
}

var scenarios = []struct{ name, what string }{
	{"bootstrap-metadata", "bootstrap from one address; Metadata lists the broker and a 3-partition topic"},
	{"produce-acks0", "100 records with acks=0, not idempotent; the broker holds them all"},
	{"produce-acks1", "100 records with acks=1, not idempotent"},
	{"produce-acksall", "100 records with acks=all, not idempotent"},
	{"produce-idempotent", "100 records with an idempotent producer (acks=all); batches carry a producer id"},
	{"keys-nulls-headers-timestamps", "keys, a null key, a null value, headers (one empty), explicit CreateTime timestamps; read back exactly"},
	{"near-max-message-bytes", "a 99,000-byte record to a topic with max.message.bytes=100000 is stored and read back"},
	{"error-record-too-large", "a 101,000-byte record to that topic is refused with MESSAGE_TOO_LARGE (10)"},
	{"consume-earliest", "read a partition from the earliest offset"},
	{"consume-latest", "start at the latest offset; only a record written afterwards arrives"},
	{"consume-timestamp", "find the offset for a timestamp (ListOffsets) and read from there"},
	{"error-unknown-topic", "Metadata for a missing topic (auto-create off) answers UNKNOWN_TOPIC_OR_PARTITION (3)"},
	{"admin-create", "create a topic with a config; creating it again is TOPIC_ALREADY_EXISTS (36)"},
	{"admin-describe-configs", "describe the topic's configs: the override and the defaults"},
	{"admin-alter-configs", "change retention.ms (incremental where the client has it) and see it described"},
	{"admin-create-partitions", "grow the topic from 2 to 4 partitions"},
	{"admin-delete", "delete the topic; it is no longer listed"},
	{"error-bad-config", "retention.ms=soon is refused with INVALID_CONFIG (40)"},
	{"group-commit-resume", "a group member reads 40 records and commits; a new member of the group gets only the 4 written later"},
	{"group-rebalance", "a second member joins (2+2 partitions), then leaves (4 again)"},
	{"txn-commit-abort", "a transactional producer commits c-0..c-4, aborts a-0..a-4 and commits c-5..c-9; a read_committed consumer reads exactly c-0..c-9 (and the broker holds the aborted records between them)"},
	{"txn-offsets", "consume, transform, produce: i-0..i-9 read from one topic; a transaction writes o-0..o-4 to another and sends offset 5 for a group with it (sendOffsetsToTransaction: AddOffsetsToTxn, TxnOffsetCommit) and commits, the next writes o-5..o-9 with offset 10 and aborts (franz-go's GroupTransactSession and sarama send a transaction's offsets only when it commits, so theirs never reach the broker); the group's committed offset is 5 and a read_committed consumer reads o-0..o-4 (the broker also holds o-5..o-9, aborted)"},
	{"txn-fencing", "producer A writes a record in an open transaction; producer B initializes with the same transactional.id, which fences A and aborts its transaction; A's commit fails with the client's fenced error (PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for requests from before KIP-588); B commits; a read_committed consumer reads only B's record"},
	{"share-consume", "share group (KIP-932): eight consumers of one group on one partition each get records and accept each record once (none delivered again); records given back (released, or held by a consumer stopped until their acquisition lock expired) come back to the others with delivery count 2"},
	{"codec-none", "writes an uncompressed topic read intact by every other client, and reads theirs"},
	{"codec-gzip", "the same with gzip (the broker keeps the writer's codec)"},
	{"codec-snappy", "the same with snappy"},
	{"codec-lz4", "the same with lz4"},
	{"codec-zstd", "the same with zstd"},
}

// securityColumns are the security scenarios, one column each of the
// security table (client rows): security_matrix_test.go.
var securityColumns = []struct{ name, head, what string }{
	{"security-sasl-ssl-scram-sha-512", "SASL_SSL, SCRAM-SHA-512",
		"20 records produced (acks=all) and read back over a SASL_SSL listener with SCRAM-SHA-512, the broker's certificate from a private CA in the client's trust store"},
	{"security-ssl-mutual-tls", "SSL, client certificate",
		"the same over an SSL listener with ssl.client.auth=required, the client presenting a certificate of that CA (a client without one is refused)"},
}

// sharedRowPrefix prefixes the cells of the shared-mode table: the
// produce and consume rows run again on topics created with
// replication.mode=shared (shared_matrix_test.go, shared_mode_test.go).
const sharedRowPrefix = "shared/"

// sharedRows are the scenarios of the shared-mode table.
var sharedRows = []string{
	"bootstrap-metadata", "produce-acks0", "produce-acks1", "produce-acksall", "produce-idempotent",
	"keys-nulls-headers-timestamps", "near-max-message-bytes", "error-record-too-large",
	"consume-earliest", "consume-latest", "consume-timestamp",
}

var toolRows = []struct{ name, what string }{
	{"tool-producer-perf", "kafka-producer-perf-test: 20,000 records, acks=all, lz4"},
	{"tool-consumer-perf", "kafka-consumer-perf-test reads the 20,000 records"},
	{"tool-consumer-groups-describe", "kafka-consumer-groups --describe: committed offsets and lag 0"},
	{"tool-share-groups", "kafka-share-groups (ShareGroupCommand) --describe (start offset and lag), --reset-offsets --to-earliest --execute (the records are delivered again), --delete-offsets"},
	{"tool-transactions", "kafka-transactions (TransactionsCommand): list (and --transactional-id-pattern), describe, describe-producers of an open transaction (its start offset and coordinator epoch), find-hanging finds a transaction no coordinator will end and abort --start-offset ends it (the last stable offset reaches the high watermark)"},
}

var clients = []struct{ name, what string }{
	{"franz-go", "franz-go kgo/kadm (kmsg for hand-built requests)"},
	{"sarama", "IBM/sarama"},
	{"kafka-go", "segmentio/kafka-go"},
	{"confluent-kafka-go", "confluent-kafka-go v2 (librdkafka, cgo)"},
	{"kcat", "kcat 1.7.1 (librdkafka 2.0.2)"},
	{"java-client", "Java kafka-clients 4.4.0"},
	{"java-tools", "Kafka 4.4.0 command-line tools"},
	{"python-confluent-kafka", "confluent-kafka (Python)"},
	{"kafka-python", "kafka-python"},
	{"kafkajs", "kafkajs"},
}

// coverage maps cells of clients without a scenario runner to the existing
// tests that exercise them (top-level test names, or Test/Subtest).
var coverage = map[string]map[string][]string{
	"franz-go": {
		"bootstrap-metadata":            {"TestFranzGoProduceConsume100k", "TestKafkaErrorCodes"},
		"produce-acks0":                 {"TestAcksLevels"},
		"produce-acks1":                 {"TestAcksLevels"},
		"produce-acksall":               {"TestFranzGoProduceConsume100k"},
		"produce-idempotent":            {"TestFranzGoProduceConsume100k", "TestKill9LosesNoAckedRecord"},
		"keys-nulls-headers-timestamps": {"TestTimestamps", "TestKcat"},
		"error-record-too-large":        {"TestKafkaErrorCodes/ProduceAndFetchErrors"},
		"consume-earliest":              {"TestFranzGoProduceConsume100k"},
		"consume-latest":                {"TestListOffsetsSemantics", "TestTailingConsumerLatency"},
		"consume-timestamp":             {"TestListOffsetsSemantics"},
		"error-unknown-topic":           {"TestKafkaErrorCodes/UnknownTopic"},
		"admin-create":                  {"TestFranzGoProduceConsume100k", "TestKafkaErrorCodes/CreateTopics"},
		"admin-describe-configs":        {"TestTopicsSurviveKill9"},
		"admin-alter-configs":           {"TestTopicsSurviveKill9"},
		"admin-create-partitions":       {"TestTopicLifecycle"},
		"admin-delete":                  {"TestTopicLifecycle"},
		"error-bad-config":              {"TestKafkaErrorCodes/CreateTopics"},
		"group-commit-resume":           {"TestGroupFranzGoRebalanceExactlyOnce", "TestGroupSurvivesBrokerKill"},
		"group-rebalance":               {"TestGroupFranzGoRebalanceExactlyOnce"},
		"share-consume":                 {"TestShareGroupFranzGo"},
	},
	"sarama": { // basic, admin and group-rebalance: sarama_matrix_test.go
		"group-commit-resume": {"TestGroupSarama"},
	},
	"kafka-go": { // basic, admin and group-rebalance: kafkago_matrix_test.go
		"group-commit-resume": {"TestGroupKafkaGo"},
	},
	"kcat": { // the basic scenarios: kcat_matrix_test.go
		"group-commit-resume": {"TestGroupKcat", "TestGroupKcatStatic"},
		"group-rebalance":     {"TestGroupKcat"},
	},
	"java-client": { // basic, admin and group scenarios: java_matrix_test.go
		// The console producer and consumer of the java-tools column are
		// the Java client (kafka-clients 4.4.0) with the codec set.
		"codec-none":   {"TestMatrixCodecs/java-tools"},
		"codec-gzip":   {"TestMatrixCodecs/java-tools"},
		"codec-snappy": {"TestMatrixCodecs/java-tools"},
		"codec-lz4":    {"TestMatrixCodecs/java-tools"},
		"codec-zstd":   {"TestMatrixCodecs/java-tools"},
		// KafkaShareConsumer.
		"share-consume": {"TestShareGroupJava"},
	},
	"java-tools": {
		"tool-share-groups": {"TestShareGroupOffsetsTool"},
		"tool-transactions": {"TestTransactionsTool"},
	},
}

// divergences: tests that pin a difference from Kafka the matrix uncovered.
var divergences = []struct{ test, what string }{
	{"TestProduceUndecodableCompressedBatch", "refuses a batch flagged compressed whose records do not decompress: it decompresses every " +
		"compressed batch while validating it (LogValidator). Sluice used to store compressed batches unread, so such a batch " +
		"(e.g. kafkajs with lz4js LZ4 frames lacking the block-independence flag) was accepted and then broke every consumer " +
		"(the Java client: \"Dependent block stream is unsupported\"); Produce now decompresses and checks every record"},
	{"TestRouting/kafka-go", "has no raft entries in a partition log. Sluice stored raft's own entries (one per leader election or " +
		"membership change) in the log as control batches, which Kafka clients skip, except kafka-go, which never checks the " +
		"control bit and handed each to the application as an empty message. They are no longer in the log and take no offset: " +
		"offsets are dense, as in Kafka"},
}

// notExpressible: cells a client cannot express at all, with the reason.
var notExpressible = map[string]map[string]string{
	"sarama": {
		"share-consume": "sarama has no share consumer (KIP-932)",
	},
	"kcat": {
		"share-consume": "kcat has no share consumer (librdkafka 2.0.2 predates KIP-932)",
		"admin-create":  "kcat has no admin commands", "admin-describe-configs": "kcat has no admin commands",
		"admin-alter-configs": "kcat has no admin commands", "admin-create-partitions": "kcat has no admin commands",
		"admin-delete": "kcat has no admin commands", "error-bad-config": "kcat has no admin commands",
		"txn-offsets": "kcat -P cannot send consumed offsets with its transaction (it never sends AddOffsetsToTxn or TxnOffsetCommit), and kcat -C commits offsets outside any transaction",
	},
	"kafka-go": {
		"share-consume":    "kafka-go has no share consumer (KIP-932)",
		"txn-commit-abort": "kafka-go has no transactional producer (it never sends InitProducerId, AddPartitionsToTxn or EndTxn)",
		"txn-offsets":      "kafka-go has no transactional producer (it never sends InitProducerId, AddPartitionsToTxn or EndTxn)",
		"txn-fencing":      "kafka-go has no transactional producer (it never sends InitProducerId, AddPartitionsToTxn or EndTxn)",
	},
	"confluent-kafka-go": {
		"share-consume": "confluent-kafka-go 2.11.1 (librdkafka 2.11.1) has no share consumer",
	},
	"kafka-python": {
		"share-consume": "kafka-python 3.0.12 has no share consumer (it only names the share APIs' keys)",
	},
	"kafkajs": {
		"share-consume": "kafkajs 2.2.4 has no share consumer (KIP-932)",
	},
	"java-tools": {
		"txn-commit-abort": "Kafka's command-line tools have no producer that both commits and aborts transactions on request (kafka-producer-perf-test commits its transactions and never aborts one; kafka-transactions lists, describes and aborts other producers' hanging transactions); the java-client column is the same library",
		"txn-offsets":      "no command-line tool commits one transaction and aborts the next on request: the only one that sends consumed offsets with its transactions, TransactionalMessageCopier (a class of the tools jar for Kafka's system tests, without a script), commits every batch it polls, or aborts one in three at random with --enable-random-aborts; the java-client column is the same library",
		"txn-fencing":      "no command-line tool holds a transaction open until told to end it (kafka-producer-perf-test and TransactionalMessageCopier end each transaction as soon as its records are sent), so a second producer cannot start in the middle of one; the java-client column is the same library",
	},
}

func main() {
	cellsPath := flag.String("cells", "", "cells.jsonl written by the matrix tests")
	jsonPath := flag.String("json", "", "go test -json output of the suite")
	outPath := flag.String("out", "docs/compat.md", "where to write the matrix")
	command := flag.String("command", "make compat", "the command named in the header")
	flag.Parse()

	cells := map[string]map[string]cell{} // client -> scenario
	versions := map[string]string{}
	var xreads []cell
	if f, err := os.Open(*cellsPath); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var c cell
			if json.Unmarshal(sc.Bytes(), &c) != nil {
				continue
			}
			switch c.Kind {
			case "version":
				versions[c.Client] = c.Detail
			case "xread":
				xreads = append(xreads, c)
			case "cell":
				if cells[c.Client] == nil {
					cells[c.Client] = map[string]cell{}
				}
				// A fail recorded anywhere wins over a pass recorded elsewhere.
				if old, ok := cells[c.Client][c.Scenario]; !ok || old.Result != "fail" {
					cells[c.Client][c.Scenario] = c
				}
			}
		}
		f.Close()
	} else {
		fmt.Fprintf(os.Stderr, "compatmatrix: %v\n", err)
	}

	outcome := map[string]string{} // test -> pass/fail/skip
	elapsed := map[string]float64{}
	var total float64
	if f, err := os.Open(*jsonPath); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 4<<20), 4<<20)
		for sc.Scan() {
			var e testEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			switch e.Action {
			case "pass", "fail", "skip":
				if e.Test == "" {
					total += e.Elapsed
					continue
				}
				outcome[e.Test] = e.Action
				elapsed[e.Test] = e.Elapsed
			}
		}
		f.Close()
	} else {
		fmt.Fprintf(os.Stderr, "compatmatrix: %v\n", err)
	}

	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	// head writes a table's header: first, then a column per name.
	head := func(first string, names []string) {
		w("| %s |", first)
		for _, n := range names {
			w(" %s |", n)
		}
		w("\n|---|")
		for range names {
			w("---|")
		}
		w("\n")
	}
	clientNames := make([]string, len(clients))
	for i, c := range clients {
		clientNames[i] = c.name
	}
	w("# Client compatibility matrix\n\n")
	w("Generated by `%s` (compat-tests/cmd/compatmatrix) from one run of the compat suite against `sluice dev`; do not edit by hand.\n\n", *command)
	w("Each cell is **pass**, **FAIL**, **n/e** (not expressible in this client, with the reason in the notes), ")
	w("**skip** (the covering test was skipped: its toolchain was missing on the machine that generated this file), ")
	w("or **—** (no test covers it yet). ")
	w("python-confluent-kafka, kafka-python, kafkajs, confluent-kafka-go and java-tools run every scenario through a runner of their own ")
	w("(compat-tests/python, js, ckg, tools_test.go; the transaction scenarios in the process of the basic ones), kcat the produce, consume, error and transaction scenarios (kcat_matrix_test.go), ")
	w("sarama and kafka-go those, the admin ones and group-rebalance (sarama_matrix_test.go, kafkago_matrix_test.go), and sarama the transaction scenarios, ")
	w("java-client the produce, consume, error, transaction, admin and group scenarios in one JVM (java_matrix_test.go, compat-tests/java Matrix.java), ")
	w("franz-go near-max-message-bytes and the transaction scenarios (franzgo_matrix_test.go); the codec rows come from one cross-client test (codecs_matrix_test.go) ")
	w("for every client that takes part in it. The other cells of franz-go, sarama, kafka-go, kcat and java-client come from the existing tests ")
	w("that exercise the scenario with that client (listed under the table).\n\n")

	head("scenario", clientNames)
	var notes []string
	noteIdx := map[string]int{}
	note := func(s string) string {
		if i, ok := noteIdx[s]; ok {
			return fmt.Sprintf("<sup>%d</sup>", i)
		}
		notes = append(notes, s)
		noteIdx[s] = len(notes)
		return fmt.Sprintf("<sup>%d</sup>", len(notes))
	}
	counts := map[string]int{}
	renderCell := func(client, scen string) string {
		if c, ok := cells[client][scen]; ok {
			switch c.Result {
			case "pass":
				counts["pass"]++
				return "pass"
			case "na":
				if strings.HasPrefix(c.Detail, "not run here") {
					counts["skip"]++
					return "skip " + note(client+": "+c.Detail)
				}
				counts["n/e"]++
				return "n/e " + note(client+": "+c.Detail)
			default:
				counts["fail"]++
				return "**FAIL** " + note(client+" "+scen+": "+c.Detail)
			}
		}
		if why, ok := notExpressible[client][scen]; ok {
			counts["n/e"]++
			return "n/e " + note(client+": "+why)
		}
		tests := coverage[client][scen]
		if len(tests) == 0 {
			counts["none"]++
			return "—"
		}
		res := "pass"
		for _, tn := range tests {
			switch outcome[tn] {
			case "pass":
			case "fail":
				res = "fail"
			case "skip":
				if res == "pass" {
					res = "skip"
				}
			default:
				if res == "pass" {
					res = "not run"
				}
			}
		}
		switch res {
		case "pass":
			counts["pass"]++
			return "pass"
		case "fail":
			counts["fail"]++
			return "**FAIL** " + note(client+" "+scen+": failed in "+strings.Join(tests, ", "))
		default:
			counts["skip"]++
			return res + " " + note(client+" "+scen+": "+strings.Join(tests, ", ")+" "+res)
		}
	}
	for _, s := range scenarios {
		w("| `%s` |", s.name)
		for _, c := range clients {
			w(" %s |", renderCell(c.name, s.name))
		}
		w("\n")
	}
	w("\nCells: %d pass, %d fail, %d not expressible, %d skipped or not run, %d not covered by a test yet.\n",
		counts["pass"], counts["fail"], counts["n/e"], counts["skip"], counts["none"])

	w("\n### Security\n\nEvery client stack against one `sluice dev` with two listeners (security_matrix_test.go); ")
	w("each cell is also checked on the broker, where franz-go reads back what the client wrote.\n\n")
	secNames := make([]string, len(securityColumns))
	for i, c := range securityColumns {
		secNames[i] = c.head
	}
	head("client", secNames)
	before := map[string]int{}
	for k, v := range counts {
		before[k] = v
	}
	for _, c := range clients {
		w("| %s |", c.name)
		for _, col := range securityColumns {
			w(" %s |", renderCell(c.name, col.name))
		}
		w("\n")
	}
	w("\nSecurity cells: %d pass, %d fail, %d not expressible, %d skipped or not run, %d not covered by a test yet.\n",
		counts["pass"]-before["pass"], counts["fail"]-before["fail"], counts["n/e"]-before["n/e"], counts["skip"]-before["skip"], counts["none"]-before["none"])

	w("\n### Shared-mode topics\n\nThe produce and consume rows again, every client stack against its own `sluice dev` ")
	w("whose shared storage is a directory (`shared.storage.type=dir`, no server to start), on topics created with ")
	w("`replication.mode=shared` (shared_matrix_test.go; the java-client column from shared_mode_test.go, on a broker whose ")
	w("default mode is shared as well). Each cell is checked on the broker as in the table above, and also needs every topic ")
	w("of the scenarios to describe `replication.mode=shared` and the shared directory to hold objects. ")
	w("Transactions on shared topics are not built (docs/shared-storage.md), so the transaction rows are not repeated here.\n\n")
	head("scenario", clientNames)
	for k, v := range counts {
		before[k] = v
	}
	for _, s := range sharedRows {
		w("| `%s` |", s)
		for _, c := range clients {
			w(" %s |", renderCell(c.name, sharedRowPrefix+s))
		}
		w("\n")
	}
	w("\nShared-mode cells: %d pass, %d fail, %d not expressible, %d skipped or not run, %d not covered by a test yet.\n",
		counts["pass"]-before["pass"], counts["fail"]-before["fail"], counts["n/e"]-before["n/e"], counts["skip"]-before["skip"], counts["none"]-before["none"])

	w("\n### Kafka's command-line tools only\n\n| scenario | java-tools |\n|---|---|\n")
	for _, s := range toolRows {
		w("| `%s` | %s |\n", s.name, renderCell("java-tools", s.name))
	}

	if len(notes) > 0 {
		w("\n### Notes\n\n")
		for i, n := range notes {
			w("%d. %s\n", i+1, strings.ReplaceAll(n, "|", "\\|"))
		}
	}

	w("\n### Scenarios\n\n| scenario | what is checked |\n|---|---|\n")
	for _, s := range append(scenarios, toolRows...) {
		w("| `%s` | %s |\n", s.name, s.what)
	}
	for _, s := range securityColumns {
		w("| `%s` | %s |\n", s.name, s.what)
	}
	w("\nWhere the broker's side can be checked it is, with franz-go: what each producer wrote (values, producer ids of idempotent batches, ")
	w("the compression codec of every batch of the codec topics).\n")

	// Cross-client codec reads.
	if len(xreads) > 0 {
		w("\n### Codec topics: reader × writer\n\nEach writer wrote one topic per codec (50 records, key, value, one header); each reader read every topic. ")
		w("A cell lists the codecs the reader read intact from that writer (✗ codec: read failed; n/e: not expressible).\n\n")
		readers := map[string]bool{}
		writers := map[string]bool{}
		byPair := map[[2]string][]cell{}
		for _, x := range xreads {
			readers[x.Client] = true
			writers[x.Writer] = true
			k := [2]string{x.Client, x.Writer}
			byPair[k] = append(byPair[k], x)
		}
		ws := keys(writers)
		head("reader \\ writer", ws)
		codecOrder := map[string]int{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
		for _, rd := range keys(readers) {
			w("| %s |", rd)
			for _, wr := range ws {
				xs := byPair[[2]string{rd, wr}]
				sort.Slice(xs, func(i, j int) bool { return codecOrder[xs[i].Codec] < codecOrder[xs[j].Codec] })
				var parts []string
				for _, x := range xs {
					switch x.Result {
					case "pass":
						parts = append(parts, x.Codec)
					case "na":
						parts = append(parts, "n/e "+x.Codec)
					default:
						parts = append(parts, "✗ "+x.Codec)
					}
				}
				w(" %s |", strings.Join(parts, ", "))
			}
			w("\n")
		}
	}

	if len(versions) > 0 {
		w("\n### Client versions\n\n")
		for _, c := range keys(versionsSet(versions)) {
			w("- %s: %s\n", c, versions[c])
		}
		w("- franz-go, sarama, kafka-go, confluent-kafka-go: the versions in compat-tests/go.mod; kcat: Debian's 1.7.1 (librdkafka 2.0.2); Java: kafka-clients and kafka-tools 4.4.0 (compat-tests/java/pom.xml)\n")
	}

	w("\n### Covering tests for the cells no runner records\n\n| client | scenario | tests | outcome |\n|---|---|---|---|\n")
	for _, c := range clients {
		cov := coverage[c.name]
		for _, s := range scenarios {
			tests := cov[s.name]
			if len(tests) == 0 {
				continue
			}
			var outs []string
			for _, tn := range tests {
				o := outcome[tn]
				if o == "" {
					o = "not run"
				}
				outs = append(outs, tn+": "+o)
			}
			w("| %s | `%s` | %s | %s |\n", c.name, s.name, strings.Join(tests, ", "), strings.Join(outs, "; "))
		}
	}

	w("\n### Broker divergences the suite found\n\n| test | what Kafka does | outcome |\n|---|---|---|\n")
	for _, d := range divergences {
		o := outcome[d.test]
		if o == "" {
			o = "not run"
		}
		if o == "fail" {
			o = "**FAIL** (Sluice still differs)"
		}
		w("| `%s` | %s | %s |\n", d.test, d.what, o)
	}

	// Every test that did not pass, so that nothing is skipped silently.
	var notPassed []string
	for tn, o := range outcome {
		if o != "pass" {
			notPassed = append(notPassed, fmt.Sprintf("%s: %s", tn, o))
		}
	}
	sort.Strings(notPassed)
	w("\n### The run\n\n%d tests and subtests ran in %.0f s of wall time for the package", len(outcome), total)
	if len(notPassed) == 0 {
		w("; every one passed.\n")
	} else {
		w("; these did not pass:\n\n")
		for _, s := range notPassed {
			w("- %s\n", s)
		}
	}
	var slow []string
	for tn, e := range elapsed {
		if !strings.Contains(tn, "/") && e >= 5 {
			slow = append(slow, fmt.Sprintf("%s %.0f s", tn, e))
		}
	}
	sort.Strings(slow)
	if len(slow) > 0 {
		w("\nTop-level tests that took 5 s or more: %s.\n", strings.Join(slow, ", "))
	}

	if err := os.WriteFile(*outPath, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("compatmatrix: wrote %s (%d pass, %d fail, %d n/e, %d skipped, %d not covered)\n", *outPath,
		counts["pass"], counts["fail"], counts["n/e"], counts["skip"], counts["none"])
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func versionsSet(m map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
