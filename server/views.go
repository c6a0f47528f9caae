package server

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metastore"
)

// brokerView is what one listener shows a client: the brokers it lists and
// how each partition is routed. DESIGN.md's view table is the contract:
// `write` lists write brokers and raft leaders, `read` read brokers and a
// read replica per partition, `mixed` everything.
//
// Today a Sluice cluster is one broker holding every role (`sluice dev`),
// so every view lists this broker and routes every partition to it. The
// read/write split replaces partitionRoute, not the handlers.
type brokerView struct {
	brokers    []kmsg.MetadataResponseBroker
	controller int32
	self       int32
}

func (s *Server) viewOf(rc *reqCtx) brokerView {
	l := rc.conn.listener
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID = s.cfg.NodeID
	b.Host = l.host
	b.Port = l.port
	if s.cfg.Rack != "" {
		b.Rack = kmsg.StringPtr(s.cfg.Rack)
	}
	return brokerView{brokers: []kmsg.MetadataResponseBroker{b}, controller: s.cfg.NodeID, self: s.cfg.NodeID}
}

// partitionRoute returns the leader a client should use for p, its epoch,
// and the replica and in-sync lists to report.
func (v brokerView) partitionRoute(p metastore.Partition) (leader, epoch int32, replicas, isr []int32) {
	return v.self, p.LeaderEpoch, []int32{v.self}, []int32{v.self}
}
