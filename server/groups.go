package server

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/coordinator"
)

// groupClient is who sent a group request: client id and host, as
// DescribeGroups reports them ("/" + address, as Kafka writes it).
func groupClient(rc *reqCtx) coordinator.Client {
	cl := coordinator.Client{}
	if rc.hdr.ClientID != nil {
		cl.ID = *rc.hdr.ClientID
	}
	host := rc.conn.nc.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	cl.Host = "/" + host
	cl.Principal = rc.conn.principal
	return cl
}

// groupCall runs a coordinator call as the request's second stage: every
// group call may wait on the metastore, and JoinGroup and SyncGroup on the
// rest of the group. fn must honour ctx.
func groupCall(rc *reqCtx, fn func(ctx context.Context) kmsg.Response) {
	rc.later(func() kmsg.Response { return fn(rc.ctx()) })
}
