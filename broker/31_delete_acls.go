package broker

// DeleteAcls (key 31), versions 0 through 3.
//
// Behaviour, as Kafka's AclApis and AclControlManager: without an
// authorizer every filter's result is SECURITY_DISABLED; without ALTER on
// the cluster CLUSTER_AUTHORIZATION_FAILED. Otherwise the filters go to
// the controller (metadata.PlanDeleteACLs): a filter with an unknown part
// gets INVALID_REQUEST; each other filter's result lists every ACL it
// matched (null name/principal/host match any, ANY types, MATCH
// patterns), even one an earlier filter also matched, and each is removed.
// The answer leaves once this broker's image, and so its authorizer, no
// longer holds any of them (read-your-writes); past the timeout the
// filters answer REQUEST_TIMED_OUT. Version 0 filters are LITERAL.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(31, 0, handleDeleteACLs) }

func handleDeleteACLs(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DeleteACLsRequest)
	resp := kmsg.NewPtrDeleteACLsResponse()
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	if code, msg := aclAPIRefusal(n.authorizer(), r); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return encodeResponse(r, resp), nil
	}
	filters := make([]authz.Filter, len(req.Filters))
	for i, f := range req.Filters {
		pattern := f.ResourcePatternType
		if r.version == 0 {
			pattern = kmsg.ACLResourcePatternTypeLiteral
		}
		filters[i] = authz.Filter{
			ResourceType: authz.ResourceType(f.ResourceType), ResourceName: f.ResourceName,
			PatternType: authz.PatternType(pattern), Principal: f.Principal, Host: f.Host,
			Operation: authz.Operation(f.Operation), Permission: authz.Permission(f.PermissionType),
		}
	}
	if len(filters) == 0 {
		return encodeResponse(r, resp), nil
	}
	cctx, cancel := context.WithTimeout(ctx, aclWriteTimeout)
	defer cancel()
	results, err := n.svc.DeleteACLs(cctx, filters)
	if err != nil {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
		}
		return encodeResponse(r, resp), nil
	}
	gone := map[uuid.UUID]bool{}
	for i, res := range results {
		if res.Err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errCode(res.Err), kmsg.StringPtr(res.Err.Error())
			continue
		}
		for _, e := range res.Deleted {
			gone[e.ID] = true
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(e.ResourceType), e.ResourceName
			m.ResourcePatternType = kmsg.ACLResourcePatternType(e.PatternType)
			m.Principal, m.Host = e.Principal, e.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(e.Operation), kmsg.ACLPermissionType(e.Permission)
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
	}
	seen := n.waitMetadata(cctx, func(st *metadata.State) bool {
		for _, e := range st.ACLs() {
			if gone[e.ID] {
				return false
			}
		}
		return true
	})
	if !seen {
		for i := range resp.Results {
			if resp.Results[i].ErrorCode == 0 {
				resp.Results[i].ErrorCode = kerr.RequestTimedOut.Code
				resp.Results[i].ErrorMessage = kmsg.StringPtr("deleted, but not yet applied on this broker")
			}
		}
	}
	return encodeResponse(r, resp), nil
}
