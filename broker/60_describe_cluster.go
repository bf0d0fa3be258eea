package broker

// DescribeCluster (key 60), versions 0 through kmsg's newest (2).
//
// Behaviour: the cluster id (the quorum's: Node.ClusterID), the controller id Metadata
// reports (this broker, which forwards admin requests to the quorum), and
// the registered brokers of the metadata image with their advertised
// listener of the name the request came in on; fenced brokers are left
// out unless IncludeFencedBrokers (v2+), then marked IsFenced.
// ClusterAuthorizedOperations is -2147483648 unless requested; when
// requested, every operation on the CLUSTER resource (there are no ACLs, so
// everything is allowed, as with Kafka without an authorizer). v1+
// EndpointType: BROKER (1) is answered; CONTROLLER (2) gets
// MISMATCHED_ENDPOINT_TYPE (this is a broker endpoint), anything else
// UNSUPPORTED_ENDPOINT_TYPE, as Kafka's brokers do.
//
// Differences from Kafka: none known.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(60, 0, handleDescribeCluster) }

// authorizedOpsOmitted is Kafka's "not requested" value of the authorized
// operations bit fields.
const authorizedOpsOmitted = -2147483648

// clusterOperations are the ACL operations of the CLUSTER resource
// (AclOperation codes: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
// DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12) as a bit field.
const clusterOperations = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12

const (
	endpointTypeBroker     = 1
	endpointTypeController = 2
)

func handleDescribeCluster(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.EndpointType = endpointTypeBroker
	resp.ClusterID = n.ClusterID()
	resp.ControllerID = n.controllerID()
	resp.ClusterAuthorizedOperations = authorizedOpsOmitted
	if r.version >= 1 && req.EndpointType != endpointTypeBroker {
		resp.EndpointType = req.EndpointType
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		if req.EndpointType == endpointTypeController {
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
		}
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("the request was sent to an endpoint of type BROKER, but asked for endpoint type %d", req.EndpointType))
		return encodeResponse(r, resp), nil
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOperations
	}
	n.view(func(st *metadata.State) {
		for _, b := range st.Brokers() {
			if b.Fenced && !req.IncludeFencedBrokers {
				continue
			}
			l, ok := pickListener(b.Listeners, r.conn.listener)
			if !ok {
				continue
			}
			rb := kmsg.NewDescribeClusterResponseBroker()
			rb.NodeID, rb.Host, rb.Port, rb.IsFenced = b.ID, l.Host, l.Port, b.Fenced
			if b.Rack != "" {
				rb.Rack = kmsg.StringPtr(b.Rack)
			}
			resp.Brokers = append(resp.Brokers, rb)
		}
	})
	return encodeResponse(r, resp), nil
}
