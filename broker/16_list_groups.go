package broker

// ListGroups (key 16), versions 0 through kmsg's newest (5).
//
// Behaviour: group.Coordinator.ListGroups: the groups of the
// __consumer_offsets partitions this broker has loaded, sorted by name;
// v4+ StatesFilter (case-insensitive Kafka state names), v5+ TypesFilter
// and GroupType ("classic", or "consumer" for KIP-848 groups, protocol
// type "consumer"). While a partition loads
// the answer carries COORDINATOR_LOAD_IN_PROGRESS with the groups loaded.
//
// Differences from Kafka: none known (a single broker answers for the
// partitions it leads, as each Kafka broker does).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
)

func init() { register(16, 0, handleListGroups) }

func handleListGroups(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.ListGroupsRequest)
	resp := n.groups.members.ListGroups(ctx, req)
	n.listConsumerGroups(req, resp) // consumer_groups.go: KIP-848 groups
	n.listShareGroups(req, resp)    // share_groups.go: KIP-932 groups
	// Kafka's check (authorize.go): DESCRIBE on the cluster lists every
	// group, else only those the principal may DESCRIBE.
	if az := n.authorizer(); az != nil && !r.allowedCluster(az, authz.OpDescribe) {
		kept := resp.Groups[:0]
		for _, g := range resp.Groups {
			if r.allowed(az, authz.OpDescribe, authz.ResGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		resp.Groups = kept
	}
	return encodeResponse(r, resp), nil
}
