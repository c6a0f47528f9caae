package server

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Admin requests are bounded before they reach the metastore, so that one
// request cannot make the broker (or the metadata quorum) allocate without
// limit: partitions per request (max.partitions.per.request), partitions
// in the cluster (max.partitions), replica lists no longer than there are
// brokers, and config names and values (config.value.max.bytes).

// clusterPartitions counts the partitions of every topic, as this
// broker's catalog sees them. Two creations at once (two brokers, or two
// requests to one) may both pass this check by what the other adds; the
// metastore checks max.partitions again where it applies each
// (Catalog.SetPartitionLimit), and the later one fails there with
// POLICY_VIOLATION.
func (s *Server) clusterPartitions() int64 {
	var n int64
	for _, t := range s.catalog.Topics() {
		n += int64(len(t.Partitions))
	}
	return n
}

// tooManyPerRequest is the POLICY_VIOLATION message for a request adding
// more than max.partitions.per.request partitions; Kafka's controller
// answers "Excessively large number of partitions per request." past its
// fixed 10,000.
func (s *Server) tooManyPerRequest(n int64) (int16, string) {
	return kerr.PolicyViolation.Code, fmt.Sprintf("Excessively large number of partitions per request: %d, more than max.partitions.per.request (%d).", n, s.cfg.MaxPartitionsPerRequest)
}

// checkClusterPartitions answers POLICY_VIOLATION when adding n
// partitions to the cluster's current would pass max.partitions.
func (s *Server) checkClusterPartitions(current, n int64) (int16, string) {
	if current+n > int64(s.cfg.MaxPartitions) {
		return kerr.PolicyViolation.Code, fmt.Sprintf("adding %d partitions to the cluster's %d would pass max.partitions (%d)", n, current, s.cfg.MaxPartitions)
	}
	return 0, ""
}

// createTopicsPartitions is what a CreateTopics request asks for in all,
// counted as Kafka's controller counts it: the assignment's length, else
// the count, else the broker default.
func (s *Server) createTopicsPartitions(req *kmsg.CreateTopicsRequest) int64 {
	var n int64
	for _, rt := range req.Topics {
		switch {
		case len(rt.ReplicaAssignment) > 0:
			n += int64(len(rt.ReplicaAssignment))
		case rt.NumPartitions == -1:
			n += int64(s.cfg.NumPartitions)
		case rt.NumPartitions > 0:
			n += int64(rt.NumPartitions)
		}
	}
	return n
}

// configEntryError bounds one config name and value of an admin request
// by config.value.max.bytes; it returns the INVALID_CONFIG message, or
// "". The name is not echoed: it may be the oversized part.
func (s *Server) configEntryError(name string, value *string) string {
	max := int(s.cfg.ConfigValueMaxBytes)
	if len(name) > max {
		return fmt.Sprintf("a config name of %d bytes is longer than config.value.max.bytes (%d)", len(name), max)
	}
	if value != nil && len(*value) > max {
		return fmt.Sprintf("the value of config %s has %d bytes, more than config.value.max.bytes (%d)", name, len(*value), max)
	}
	return ""
}
