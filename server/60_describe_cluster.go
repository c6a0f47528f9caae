package server

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/acl"
)

// DescribeCluster (key 60). Supported: v0-2.
//
// Semantics: the cluster id, the controller named in this listener's view
// and the brokers of that view. Sluice brokers have no KRaft controller
// endpoints, so EndpointType 2 (controllers) gets UNSUPPORTED_ENDPOINT_TYPE,
// as a Kafka broker answers it. Authorized operations, when asked for,
// come from the authorizer (every cluster operation without one; 0
// without DESCRIBE on the cluster, as Kafka). Needs no permission itself.
// Version notes: v1 endpoint type; v2 fenced brokers.
// Roles: every broker.
func init() { register(60, handleDescribeCluster) }

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
		resp.ClusterAuthorizedOperations = 0
		if s.authorizeCluster(rc, acl.OpDescribe) {
			resp.ClusterAuthorizedOperations = s.authorizedOps(rc, acl.ResourceCluster, acl.ClusterName, acl.ClusterOps)
		}
	}
	for _, b := range view.brokers {
		db := kmsg.NewDescribeClusterResponseBroker()
		db.NodeID, db.Host, db.Port, db.Rack = b.NodeID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, db)
	}
	return resp, nil
}
