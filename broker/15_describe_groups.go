package broker

// DescribeGroups (key 15), versions 0 through kmsg's newest (6).
//
// Behaviour: group.Coordinator.DescribeGroups: state, protocol type, the
// selected protocol and members (client id, host, v4+ instance id); member
// metadata and assignment bytes only for a Stable group, as Kafka. An
// unknown group is described as Dead; v6+ also gets GROUP_ID_NOT_FOUND.
// v3+ AuthorizedOperations is -2147483648 unless requested, then READ,
// DELETE and DESCRIBE (no ACLs: everything is allowed). A group of a
// partition this broker does not lead gets NOT_COORDINATOR, one loading
// COORDINATOR_LOAD_IN_PROGRESS.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
)

func init() { register(15, 0, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeGroupsRequest)
	resp, err := handleDescribeClassicGroups(ctx, n, r, req)
	if err != nil {
		return nil, err
	}
	// A KIP-848 group is no classic group: Dead (unknown) to v0-v5, and
	// v6+'s GROUP_ID_NOT_FOUND says so, as Kafka.
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if g.ErrorCode == kerr.GroupIDNotFound.Code && (n.groupIsConsumer(g.Group) || n.groupIsShare(g.Group)) {
			g.ErrorMessage = kmsg.StringPtr("Group " + g.Group + " is not a classic group.")
		}
	}
	return encodeResponse(r, resp), nil
}

func handleDescribeClassicGroups(ctx context.Context, n *Node, r *request, req *kmsg.DescribeGroupsRequest) (*kmsg.DescribeGroupsResponse, error) {
	// Kafka's check (authorize.go): DESCRIBE on each group; a refused one
	// answers GROUP_AUTHORIZATION_FAILED and is not looked up.
	az := n.authorizer()
	if az == nil {
		return n.groups.members.DescribeGroups(ctx, req), nil
	}
	allowed := *req
	allowed.Groups = nil
	for _, g := range req.Groups {
		if r.allowed(az, authz.OpDescribe, authz.ResGroup, g) {
			allowed.Groups = append(allowed.Groups, g)
		}
	}
	described := n.groups.members.DescribeGroups(ctx, &allowed)
	byName := map[string]kmsg.DescribeGroupsResponseGroup{}
	for _, g := range described.Groups {
		byName[g.Group] = g
	}
	resp := *described
	resp.Groups = nil
	for _, g := range req.Groups {
		if d, ok := byName[g]; ok {
			resp.Groups = append(resp.Groups, d)
			continue
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return &resp, nil
}
