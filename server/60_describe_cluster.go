package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster (key 60). Supported: v0-2.
//
// Semantics: the cluster id, the controller named in this listener's view
// and the brokers of that view. Sluice brokers have no KRaft controller
// endpoints, so EndpointType 2 (controllers) gets UNSUPPORTED_ENDPOINT_TYPE,
// as a Kafka broker answers it. Authorized operations, when asked for, are
// every cluster operation (there is no authorizer yet).
// Version notes: v1 endpoint type; v2 fenced brokers.
// Roles: every broker.
func init() { register(60, handleDescribeCluster) }

// Kafka AclOperation codes, as bits of an authorized-operations field.
const (
	opRead            = 3
	opWrite           = 4
	opCreate          = 5
	opDelete          = 6
	opAlter           = 7
	opDescribe        = 8
	opClusterAction   = 9
	opDescribeConfigs = 10
	opAlterConfigs    = 11
	opIdempotentWrite = 12
)

func opBits(ops ...int) int32 {
	var b int32
	for _, o := range ops {
		b |= 1 << o
	}
	return b
}

// Without an authorizer every operation is allowed, and Kafka reports so.
var (
	clusterOps = opBits(opCreate, opAlter, opDescribe, opClusterAction, opDescribeConfigs, opAlterConfigs, opIdempotentWrite)
	topicOps   = opBits(opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs)
)

func handleDescribeCluster(s *Server, rc *reqCtx, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = kmsg.StringPtr("this is a broker: it describes broker endpoints (type 1) only")
		return resp, nil
	}
	view := s.viewOf(rc)
	resp.ClusterID = s.catalog.ClusterID()
	resp.ControllerID = view.controller
	resp.ClusterAuthorizedOperations = authorizedOperationsUnset
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOps
	}
	for _, b := range view.brokers {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = b.NodeID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp, nil
}
