package broker

// CreateAcls (key 30), versions 0 through 3.
//
// Behaviour, as Kafka's AclApis and AclControlManager: without an
// authorizer every result is SECURITY_DISABLED; without ALTER on the
// cluster every result is CLUSTER_AUTHORIZATION_FAILED. Otherwise the
// bindings go to the controller (metadata.PlanCreateACLs: INVALID_REQUEST
// for an unknown or ANY/MATCH resource or pattern type, ANY operation or
// permission, an empty name, a CLUSTER resource not named kafka-cluster, a
// principal not Type:name; a binding already present succeeds). The answer
// leaves only once this broker's image, and so its authorizer, holds every
// created binding (read-your-writes); past the request timeout the created
// ones answer REQUEST_TIMED_OUT. Version 0 bindings are LITERAL.
//
// Differences from Kafka: none known.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(30, 0, handleCreateACLs) }

// aclWriteTimeout bounds the controller round trip and the wait for the
// image of an ACL change (the ACL requests carry no timeout of their own).
const aclWriteTimeout = 30 * time.Second

func handleCreateACLs(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.CreateACLsRequest)
	resp := kmsg.NewPtrCreateACLsResponse()
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	if code, msg := aclAPIRefusal(n.authorizer(), r); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return encodeResponse(r, resp), nil
	}
	acls := make([]authz.ACL, len(req.Creations))
	for i, c := range req.Creations {
		pattern := c.ResourcePatternType
		if r.version == 0 {
			pattern = kmsg.ACLResourcePatternTypeLiteral
		}
		acls[i] = authz.ACL{
			ResourceType: authz.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: authz.PatternType(pattern), Principal: c.Principal, Host: c.Host,
			Operation: authz.Operation(c.Operation), Permission: authz.Permission(c.PermissionType),
		}
	}
	if len(acls) == 0 {
		return encodeResponse(r, resp), nil
	}
	cctx, cancel := context.WithTimeout(ctx, aclWriteTimeout)
	defer cancel()
	results, err := n.svc.CreateACLs(cctx, acls)
	if err != nil {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errCode(err), kmsg.StringPtr(err.Error())
		}
		return encodeResponse(r, resp), nil
	}
	var created []authz.ACL
	for i, res := range results {
		if res.Err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = errCode(res.Err), kmsg.StringPtr(res.Err.Error())
		} else {
			created = append(created, acls[i])
		}
	}
	seen := n.waitMetadata(cctx, func(st *metadata.State) bool {
		have := map[authz.ACL]bool{}
		for _, e := range st.ACLs() {
			have[e.ACL] = true
		}
		for _, a := range created {
			if !have[a] {
				return false
			}
		}
		return true
	})
	if !seen {
		for i, res := range results {
			if res.Err == nil {
				resp.Results[i].ErrorCode = kerr.RequestTimedOut.Code
				resp.Results[i].ErrorMessage = kmsg.StringPtr("created, but not yet applied on this broker")
			}
		}
	}
	return encodeResponse(r, resp), nil
}
