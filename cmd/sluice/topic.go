package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/clientconfig"
)

// The topic and group commands are Kafka clients (kadm over kgo), as
// kafka-topics.sh and kafka-consumer-groups.sh are: they work against any
// listener of the cluster, and what they print is what a client sees.

// adminTimeout bounds one invocation of a command that talks Kafka.
const adminTimeout = 15 * time.Second

// clientFlags are the connection flags of every command that talks Kafka:
// --bootstrap-server and --command-config, as Kafka's tools have them.
type clientFlags struct {
	bootstrap     string
	commandConfig string
	fs            *pflag.FlagSet // says whether --bootstrap-server was given
}

func (f *clientFlags) bind(fs *pflag.FlagSet, bootstrapHelp string) {
	f.fs = fs
	fs.StringVar(&f.bootstrap, "bootstrap-server", "127.0.0.1:9092", bootstrapHelp)
	fs.StringVar(&f.commandConfig, "command-config", "", "Kafka client properties file: security.protocol, sasl.mechanism, sasl.jaas.config "+
		"(or sasl.username/sasl.password), ssl.truststore.location, ssl.keystore.location (PEM), as Kafka's tools take it")
}

// client connects as the flags say. Without --bootstrap-server, the
// command config's bootstrap.servers is used when it has one.
func (f *clientFlags) client(errw io.Writer) (*kgo.Client, string, error) {
	bootstrap := f.bootstrap
	opts := []kgo.Opt{}
	if f.commandConfig != "" {
		cc, err := clientconfig.Load(f.commandConfig)
		if err != nil {
			return nil, "", fmt.Errorf("--command-config %w", err)
		}
		for _, k := range cc.Ignored {
			fmt.Fprintf(errw, "sluice: %s: %s is not used by this command\n", f.commandConfig, k)
		}
		if len(cc.BootstrapServers) > 0 && !f.fs.Changed("bootstrap-server") {
			bootstrap = strings.Join(cc.BootstrapServers, ",")
		}
		if opts, err = cc.Opts(); err != nil {
			return nil, "", fmt.Errorf("--command-config %s: %w", f.commandConfig, err)
		}
	}
	cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(strings.Split(bootstrap, ",")...))...)
	if err != nil {
		return nil, "", err
	}
	return cl, bootstrap, nil
}

// kafkaAdmin connects as the flags say.
func (f *clientFlags) kafkaAdmin(errw io.Writer) (*kadm.Client, func(), string, error) {
	cl, bootstrap, err := f.client(errw)
	if err != nil {
		return nil, nil, "", err
	}
	return kadm.NewClient(cl), cl.Close, bootstrap, nil
}

// writeJSON prints v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func topicCommand() *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{Use: "topic", Short: "List and describe topics (as kafka-topics.sh --list and --describe)"}
	cf.bind(cmd.PersistentFlags(), "host:port of a Kafka listener (comma-separated for several)")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	list := &cobra.Command{
		Use:   "list",
		Short: "Print the topics' names, one a line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), adminTimeout)
			defer cancel()
			adm, done, bootstrap, err := cf.kafkaAdmin(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer done()
			md, err := adm.Metadata(ctx)
			if err != nil {
				return fmt.Errorf("metadata from %s: %w", bootstrap, err)
			}
			names := md.Topics.Names()
			sort.Strings(names)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), names)
			}
			for _, n := range names {
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			return nil
		},
	}
	describe := &cobra.Command{
		Use:   "describe [TOPIC...]",
		Short: "Print each topic's partitions with leader, replicas and ISR, and its configs set explicitly (every topic without arguments)",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), adminTimeout)
			defer cancel()
			adm, done, _, err := cf.kafkaAdmin(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer done()
			topics, err := describeTopics(ctx, adm, args)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), topics)
			}
			printTopics(cmd.OutOrStdout(), topics)
			for _, t := range topics {
				if t.Error != "" {
					return fmt.Errorf("topic %s: %s", t.Name, t.Error)
				}
			}
			return nil
		},
	}
	cmd.AddCommand(list, describe)
	return cmd
}

// topicDescription is one topic as `sluice topic describe` prints it; the
// JSON field names are stable.
type topicDescription struct {
	Name              string                 `json:"name"`
	ID                string                 `json:"id,omitempty"`
	PartitionCount    int                    `json:"partition_count"`
	ReplicationFactor int                    `json:"replication_factor"`
	Configs           map[string]string      `json:"configs"`
	Partitions        []partitionDescription `json:"partitions"`
	Error             string                 `json:"error,omitempty"`
}

type partitionDescription struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
}

// describeTopics asks Metadata and the topics' dynamic configs (Kafka's
// tool prints only those too). An unknown topic named is an entry with
// its error, as kafka-topics reports it.
func describeTopics(ctx context.Context, adm *kadm.Client, names []string) ([]topicDescription, error) {
	md, err := adm.Metadata(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	all := md.Topics.Names()
	sort.Strings(all)
	cfgs := map[string]map[string]string{}
	var ok []string
	for _, n := range all {
		if md.Topics[n].Err == nil {
			ok = append(ok, n)
		}
	}
	if len(ok) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, ok...)
		if err != nil {
			return nil, fmt.Errorf("describe configs: %w", err)
		}
		for _, rc := range rcs {
			m := map[string]string{}
			for _, c := range rc.Configs {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
					m[c.Key] = *c.Value
				}
			}
			cfgs[rc.Name] = m
		}
	}
	out := make([]topicDescription, 0, len(all))
	for _, n := range all {
		td := md.Topics[n]
		d := topicDescription{Name: n, Configs: cfgs[n], Partitions: []partitionDescription{}}
		if d.Configs == nil {
			d.Configs = map[string]string{}
		}
		if td.Err != nil {
			d.Error = td.Err.Error()
			out = append(out, d)
			continue
		}
		if td.ID != (kadm.TopicID{}) {
			d.ID = td.ID.String()
		}
		for _, p := range td.Partitions.Sorted() {
			d.Partitions = append(d.Partitions, partitionDescription{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), OfflineReplicas: nonNil(p.OfflineReplicas),
			})
		}
		d.PartitionCount = len(d.Partitions)
		if len(d.Partitions) > 0 {
			d.ReplicationFactor = len(d.Partitions[0].Replicas)
		}
		out = append(out, d)
	}
	return out, nil
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

// printTopics prints kafka-topics --describe's layout: a topic line, then
// one tab-indented line per partition.
func printTopics(w io.Writer, topics []topicDescription) {
	for _, t := range topics {
		if t.Error != "" {
			fmt.Fprintf(w, "Topic: %s\tError: %s\n", t.Name, t.Error)
			continue
		}
		var cfg []string
		for _, k := range slices.Sorted(maps.Keys(t.Configs)) {
			cfg = append(cfg, k+"="+t.Configs[k])
		}
		fmt.Fprintf(w, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			t.Name, t.ID, t.PartitionCount, t.ReplicationFactor, strings.Join(cfg, ","))
		for _, p := range t.Partitions {
			fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s",
				t.Name, p.Partition, leaderText(p.Leader), ids(p.Replicas), ids(p.ISR))
			if len(p.OfflineReplicas) > 0 {
				fmt.Fprintf(w, "\tOffline: %s", ids(p.OfflineReplicas))
			}
			fmt.Fprintln(w)
		}
	}
}

func leaderText(id int32) string {
	if id < 0 {
		return "none"
	}
	return fmt.Sprint(id)
}

// ids joins broker ids with commas, as Kafka's tools print replica lists.
func ids(s []int32) string {
	parts := make([]string, len(s))
	for i, id := range s {
		parts[i] = fmt.Sprint(id)
	}
	return strings.Join(parts, ",")
}

func groupCommand() *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{Use: "group", Short: "List and describe consumer groups (as kafka-consumer-groups.sh --list and --describe)"}
	cf.bind(cmd.PersistentFlags(), "host:port of a Kafka listener that reaches the read brokers (comma-separated for several)")
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	list := &cobra.Command{
		Use:   "list",
		Short: "Print the groups' names (with --json also their state, protocol type and coordinator)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), adminTimeout)
			defer cancel()
			adm, done, _, err := cf.kafkaAdmin(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer done()
			groups, err := listGroups(ctx, adm)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), groups)
			}
			for _, g := range groups {
				fmt.Fprintln(cmd.OutOrStdout(), g.Group)
			}
			return nil
		},
	}
	describe := &cobra.Command{
		Use:   "describe [GROUP...]",
		Short: "Print each group's offsets, log end offsets, lag and members per partition (every group without arguments)",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), adminTimeout)
			defer cancel()
			adm, done, _, err := cf.kafkaAdmin(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer done()
			if len(args) == 0 {
				groups, err := listGroups(ctx, adm)
				if err != nil {
					return err
				}
				for _, g := range groups {
					args = append(args, g.Group)
				}
			}
			groups, err := describeGroups(ctx, adm, args)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), groups)
			}
			printGroups(cmd.OutOrStdout(), groups)
			for _, g := range groups {
				if g.Error != "" {
					return fmt.Errorf("group %s: %s", g.Group, g.Error)
				}
			}
			return nil
		},
	}
	cmd.AddCommand(list, describe)
	return cmd
}

// groupListing is one group as `sluice group list --json` prints it.
type groupListing struct {
	Group        string `json:"group"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
}

func listGroups(ctx context.Context, adm *kadm.Client) ([]groupListing, error) {
	lg, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	out := []groupListing{}
	for _, g := range lg.Sorted() {
		out = append(out, groupListing{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType, Coordinator: g.Coordinator})
	}
	return out, nil
}

// groupDescription is one group as `sluice group describe` prints it.
type groupDescription struct {
	Group       string           `json:"group"`
	State       string           `json:"state"`
	Coordinator int32            `json:"coordinator"`
	Protocol    string           `json:"protocol"`
	Members     []groupMember    `json:"members"`
	Partitions  []groupPartition `json:"partitions"`
	Error       string           `json:"error,omitempty"`
}

type groupMember struct {
	MemberID   string `json:"member_id"`
	ClientID   string `json:"client_id"`
	Host       string `json:"host"`
	InstanceID string `json:"instance_id,omitempty"`
}

// groupPartition is one partition's row. CurrentOffset is -1 without a
// commit, Lag -1 when it cannot be computed (no commit or no end offset),
// as kafka-consumer-groups prints "-" for both.
type groupPartition struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset int64  `json:"current_offset"`
	LogEndOffset  int64  `json:"log_end_offset"`
	Lag           int64  `json:"lag"`
	MemberID      string `json:"member_id,omitempty"`
	ClientID      string `json:"client_id,omitempty"`
	Host          string `json:"host,omitempty"`
	Error         string `json:"error,omitempty"`
}

// describeGroups is kadm's Lag (DescribeGroups, OffsetFetch and
// ListOffsets for the high watermarks), flattened.
func describeGroups(ctx context.Context, adm *kadm.Client, names []string) ([]groupDescription, error) {
	out := []groupDescription{}
	if len(names) == 0 {
		return out, nil
	}
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("group lag: %w", err)
	}
	for _, l := range lags.Sorted() {
		d := groupDescription{Group: l.Group, State: l.State, Coordinator: l.Coordinator.NodeID, Protocol: l.Protocol,
			Members: []groupMember{}, Partitions: []groupPartition{}}
		if err := l.Error(); err != nil {
			d.Error = err.Error()
		}
		for _, m := range l.Members {
			gm := groupMember{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
			if m.InstanceID != nil {
				gm.InstanceID = *m.InstanceID
			}
			d.Members = append(d.Members, gm)
		}
		for _, ml := range l.Lag.Sorted() {
			gp := groupPartition{Topic: ml.Topic, Partition: ml.Partition, CurrentOffset: ml.Commit.At, LogEndOffset: ml.End.Offset, Lag: ml.Lag}
			if ml.Commit.At < 0 {
				gp.CurrentOffset = -1
			}
			if ml.End.Err != nil {
				gp.LogEndOffset = -1
			}
			if ml.Err != nil {
				gp.Error = ml.Err.Error()
			}
			if ml.Member != nil {
				gp.MemberID, gp.ClientID, gp.Host = ml.Member.MemberID, ml.Member.ClientID, ml.Member.ClientHost
			}
			d.Partitions = append(d.Partitions, gp)
		}
		out = append(out, d)
	}
	return out, nil
}

// printGroups prints kafka-consumer-groups --describe's table: one row per
// partition, "-" where there is no value.
func printGroups(w io.Writer, groups []groupDescription) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	dash := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return fmt.Sprint(v)
	}
	or := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for i, g := range groups {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		if g.Error != "" {
			fmt.Fprintf(tw, "Group %s: %s\n", g.Group, g.Error)
			continue
		}
		fmt.Fprintf(tw, "Group %s is %s (coordinator %d, %d members)\n", g.Group, g.State, g.Coordinator, len(g.Members))
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
		for _, p := range g.Partitions {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Group, p.Topic, p.Partition,
				dash(p.CurrentOffset), dash(p.LogEndOffset), dash(p.Lag), or(p.MemberID), or(p.Host), or(p.ClientID))
		}
	}
	tw.Flush()
}
