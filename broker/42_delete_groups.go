package broker

// DeleteGroups (key 42), versions 0 through kmsg's newest (3).
//
// Behaviour: group.Coordinator.DeleteGroups: only an Empty group is
// deleted (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND if unknown); its
// group metadata and committed offsets are tombstoned in
// __consumer_offsets before the answer. Duplicate names are answered once.
// A KIP-848 consumer group is deleted the same way, with the tombstones of
// its records 3 and 6 (consumer_groups.go).
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
)

func init() { register(42, 0, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DeleteGroupsRequest)
	// Kafka's check (authorize.go): DELETE on each group; a refused one
	// answers GROUP_AUTHORIZATION_FAILED and is not deleted.
	az := n.authorizer()
	if az == nil {
		return encodeResponse(r, n.deleteGroups(ctx, req)), nil
	}
	allowed := *req
	allowed.Groups = nil
	for _, g := range req.Groups {
		if r.allowed(az, authz.OpDelete, authz.ResGroup, g) {
			allowed.Groups = append(allowed.Groups, g)
		}
	}
	deleted := n.deleteGroups(ctx, &allowed)
	byName := map[string]kmsg.DeleteGroupsResponseGroup{}
	for _, g := range deleted.Groups {
		byName[g.Group] = g
	}
	resp := *deleted
	resp.Groups = nil
	for _, g := range req.Groups {
		if d, ok := byName[g]; ok {
			resp.Groups = append(resp.Groups, d)
			continue
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return encodeResponse(r, &resp), nil
}
