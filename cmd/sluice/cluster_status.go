package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clusterCommand is `sluice cluster status`: the brokers and the
// partitions that are not fully replicated, as a Kafka client sees them
// through one listener (Metadata's replicas, ISR and offline replicas:
// docs/architecture.md, "Replicas and ISR"). A read broker that lags shows
// here as missing from its partitions' ISR.
func clusterCommand() *cobra.Command {
	var bootstrap string
	cmd := &cobra.Command{Use: "cluster", Short: "Show the cluster as Kafka clients see it"}
	status := &cobra.Command{
		Use:   "status",
		Short: "List the brokers and every under-replicated, offline or leaderless partition",
		Long: "Asks Metadata through the listener given (a mixed listener shows write and read brokers) " +
			"and lists the brokers, then each partition whose ISR is shorter than its replicas, " +
			"that has offline replicas, or that has no leader, with a summary line.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 15*time.Second)
			defer cancel()
			cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
			if err != nil {
				return err
			}
			defer cl.Close()
			md, err := kadm.NewClient(cl).Metadata(ctx)
			if err != nil {
				return fmt.Errorf("metadata from %s: %w", bootstrap, err)
			}
			return printClusterStatus(cmd.OutOrStdout(), md)
		},
	}
	status.Flags().StringVar(&bootstrap, "bootstrap-server", "127.0.0.1:9092", "host:port of a Kafka listener (comma-separated for several)")
	cmd.AddCommand(status)
	return cmd
}

func printClusterStatus(w io.Writer, md kadm.Metadata) error {
	fmt.Fprintf(w, "cluster %s, controller %d\n", md.Cluster, md.Controller)
	for _, b := range md.Brokers {
		rack := ""
		if b.Rack != nil {
			rack = " rack " + *b.Rack
		}
		fmt.Fprintf(w, "broker %d %s:%d%s\n", b.NodeID, b.Host, b.Port, rack)
	}
	var total, under, offline, leaderless int
	names := md.Topics.Names()
	sort.Strings(names)
	for _, name := range names {
		td := md.Topics[name]
		if td.Err != nil {
			fmt.Fprintf(w, "topic %s: %v\n", name, td.Err)
			continue
		}
		for _, p := range td.Partitions.Sorted() {
			total++
			var problems []string
			if len(p.ISR) < len(p.Replicas) {
				under++
				var out []int32
				for _, id := range p.Replicas {
					if !slices.Contains(p.ISR, id) {
						out = append(out, id)
					}
				}
				problems = append(problems, fmt.Sprintf("under-replicated (not in sync: %v)", out))
			}
			if len(p.OfflineReplicas) > 0 {
				offline++
				problems = append(problems, fmt.Sprintf("offline replicas %v", p.OfflineReplicas))
			}
			if p.Leader < 0 {
				leaderless++
				problems = append(problems, "no leader")
			}
			if len(problems) > 0 {
				fmt.Fprintf(w, "%s/%d leader %d replicas %v isr %v: %s\n", name, p.Partition, p.Leader, p.Replicas, p.ISR, strings.Join(problems, ", "))
			}
		}
	}
	fmt.Fprintf(w, "%d partitions: %d under-replicated, %d with offline replicas, %d without a leader\n", total, under, offline, leaderless)
	return nil
}
