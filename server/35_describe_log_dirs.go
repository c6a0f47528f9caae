package server

import (
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
	"github.com/sluice-broker/sluice/partition"
)

// DescribeLogDirs (key 35). Supported: v0-4.
//
// Semantics, as Kafka's ReplicaManager.describeLogDirs: the broker's one
// log directory (absolute path), with every partition replica this broker
// hosts (leader, follower or read replica) when Topics is null, or those of
// the requested topics and partitions it hosts otherwise (others are left
// out, as Kafka leaves them out). Size is the bytes of the partition's
// segments; OffsetLag is max(high watermark - log end, 0), 0 for a current
// log as in Kafka (no future logs: IsFuture is false). v4 adds the total
// and usable bytes of the directory's volume (statfs; -1 when unknown).
// The request needs DESCRIBE on the cluster, as in Kafka's KafkaApis:
// without it the answer lists no directory, with
// CLUSTER_AUTHORIZATION_FAILED (v3+).
// Version notes: v2+ flexible, v3 top-level error code, v4 volume bytes.
// Roles: every broker, for the partitions it hosts.
func init() { register(35, handleDescribeLogDirs) }

// localLog is one partition replica this broker hosts, for the log admin
// APIs.
type localLog struct {
	topic string
	index int32
	p     hostedPartition
}

// localLogs lists the partition replicas this broker hosts, and the
// directory their logs live in.
func (s *Server) localLogs() (dir string, logs []localLog) {
	for _, r := range s.raft.Replicas() {
		logs = append(logs, localLog{topic: r.Topic(), index: r.Key().Index, p: r})
	}
	return s.raft.Dir(), logs
}

func handleDescribeLogDirs(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !s.authorizeCluster(rc, acl.OpDescribe) {
		// No directories; the error code reaches v3+ clients only, as in
		// Kafka.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	dir, logs := s.localLogs()
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	var want map[string]map[int32]bool // nil: every partition
	if req.Topics != nil {
		want = make(map[string]map[int32]bool)
		for _, rt := range req.Topics {
			if want[rt.Topic] == nil {
				want[rt.Topic] = make(map[int32]bool)
			}
			for _, p := range rt.Partitions {
				want[rt.Topic][p] = true
			}
		}
	}
	byTopic := make(map[string][]kmsg.DescribeLogDirsResponseDirTopicPartition)
	for _, l := range logs {
		if want != nil && !want[l.topic][l.index] {
			continue
		}
		if _, ok := s.catalog.TopicByName(l.topic); !ok {
			continue // deleted: about to be removed
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition = l.index
		dp.Size = logSize(l.p.Storage())
		dp.OffsetLag = max(l.p.HighWatermark()-l.p.LogEndOffset(), 0)
		byTopic[l.topic] = append(byTopic[l.topic], dp)
	}
	d := kmsg.NewDescribeLogDirsResponseDir()
	d.Dir = dir
	d.Topics = []kmsg.DescribeLogDirsResponseDirTopic{}
	names := make([]string, 0, len(byTopic))
	for name := range byTopic {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = name
		dt.Partitions = byTopic[name]
		sort.Slice(dt.Partitions, func(i, j int) bool { return dt.Partitions[i].Partition < dt.Partitions[j].Partition })
		d.Topics = append(d.Topics, dt)
	}
	if req.Version >= 4 {
		d.TotalBytes, d.UsableBytes = volumeBytes(dir)
	}
	resp.Dirs = append(resp.Dirs, d)
	return resp, nil
}

func logSize(l partition.Storage) int64 {
	n, _ := l.Size()
	return n
}
