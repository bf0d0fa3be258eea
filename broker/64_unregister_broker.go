package broker

// UnregisterBroker (key 64), versions 0 through kmsg's newest (0).
//
// Behaviour (KIP-631): forwarded to the controller, which takes the broker
// out of every ISR and leadership as when it is fenced (a partition it
// alone holds stays with it, led by no one) and removes its registration
// (metadata.State.PlanUnregisterBroker); the broker then leaves Metadata
// and DescribeCluster, while its place in replica lists stays, as Kafka
// keeps it (an offline replica). The answer comes once the controller has
// committed it. BROKER_ID_NOT_REGISTERED for an unknown id; a controller
// that cannot be reached within 30 s answers REQUEST_TIMED_OUT. A broker
// still running registers again at its next heartbeat, with a new epoch
// (Kafka's does the same): decommission is drain (`strata cluster drain`),
// stop, then unregister (`strata cluster unregister`).
//
// Differences from Kafka: no authorizer (Kafka requires ALTER on the
// cluster; CLUSTER_AUTHORIZATION_FAILED is never returned).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(64, 0, handleUnregisterBroker) }

func handleUnregisterBroker(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.UnregisterBrokerRequest)
	resp := kmsg.NewPtrUnregisterBrokerResponse()
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(0))
	defer cancel()
	if err := n.svc.UnregisterBroker(cctx, req.BrokerID); err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
	}
	return encodeResponse(r, resp), nil
}
