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
)

// clusterCommand is `sluice cluster status`: the brokers and the
// partitions that are not fully replicated, as a Kafka client sees them
// through one listener (Metadata's replicas, ISR and offline replicas:
// docs/architecture.md, "Replicas and ISR"). A read broker that lags shows
// here as missing from its partitions' ISR.
func clusterCommand() *cobra.Command {
	var cf clientFlags
	var asJSON bool
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
			cl, bootstrap, err := cf.client(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer cl.Close()
			md, err := kadm.NewClient(cl).Metadata(ctx)
			if err != nil {
				return fmt.Errorf("metadata from %s: %w", bootstrap, err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), clusterStatusJSON(md))
			}
			return printClusterStatus(cmd.OutOrStdout(), md)
		},
	}
	cf.bind(status.Flags(), "host:port of a Kafka listener (comma-separated for several)")
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON: every broker and every partition, with its problems")
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

// clusterStatusJSONView is `sluice cluster status --json`: every broker and every
// partition (not only those with problems), with stable field names.
type clusterStatusJSONView struct {
	Cluster    string             `json:"cluster"`
	Controller int32              `json:"controller"`
	Brokers    []clusterBroker    `json:"brokers"`
	Partitions []clusterPartition `json:"partitions"`
	Summary    map[string]int     `json:"summary"`
}

type clusterBroker struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	Rack string `json:"rack,omitempty"`
}

type clusterPartition struct {
	Topic           string   `json:"topic"`
	Partition       int32    `json:"partition"`
	Leader          int32    `json:"leader"`
	Replicas        []int32  `json:"replicas"`
	ISR             []int32  `json:"isr"`
	OfflineReplicas []int32  `json:"offline_replicas"`
	Problems        []string `json:"problems"`
	Error           string   `json:"error,omitempty"`
}

func clusterStatusJSON(md kadm.Metadata) clusterStatusJSONView {
	st := clusterStatusJSONView{Cluster: md.Cluster, Controller: md.Controller, Brokers: []clusterBroker{}, Partitions: []clusterPartition{},
		Summary: map[string]int{"partitions": 0, "under_replicated": 0, "offline_replicas": 0, "leaderless": 0}}
	for _, b := range md.Brokers {
		cb := clusterBroker{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			cb.Rack = *b.Rack
		}
		st.Brokers = append(st.Brokers, cb)
	}
	names := md.Topics.Names()
	sort.Strings(names)
	for _, name := range names {
		td := md.Topics[name]
		if td.Err != nil {
			st.Partitions = append(st.Partitions, clusterPartition{Topic: name, Partition: -1, Leader: -1,
				Replicas: []int32{}, ISR: []int32{}, OfflineReplicas: []int32{}, Problems: []string{}, Error: td.Err.Error()})
			continue
		}
		for _, p := range td.Partitions.Sorted() {
			cp := clusterPartition{Topic: name, Partition: p.Partition, Leader: p.Leader,
				Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), OfflineReplicas: nonNil(p.OfflineReplicas), Problems: []string{}}
			st.Summary["partitions"]++
			if len(p.ISR) < len(p.Replicas) {
				st.Summary["under_replicated"]++
				cp.Problems = append(cp.Problems, "under_replicated")
			}
			if len(p.OfflineReplicas) > 0 {
				st.Summary["offline_replicas"]++
				cp.Problems = append(cp.Problems, "offline_replicas")
			}
			if p.Leader < 0 {
				st.Summary["leaderless"]++
				cp.Problems = append(cp.Problems, "no_leader")
			}
			st.Partitions = append(st.Partitions, cp)
		}
	}
	return st
}
