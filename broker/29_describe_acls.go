package broker

// DescribeAcls (key 29), versions 0 through 3, and the helpers CreateAcls
// (30) and DeleteAcls (31) share.
//
// Behaviour, as Kafka's AclApis: without an authorizer the answer is
// SECURITY_DISABLED ("No Authorizer is configured on the broker"); a
// principal without DESCRIBE on the cluster gets
// CLUSTER_AUTHORIZATION_FAILED; a filter with an unknown part gets
// INVALID_REQUEST. Otherwise the ACLs of this broker's metadata image that
// the filter matches (authz.Filter: null name/principal/host match any,
// ANY types, MATCH patterns) are returned grouped by resource pattern.
// Version 0 has no pattern type: its filter and bindings are LITERAL.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(29, 0, handleDescribeACLs) }

// securityDisabledMsg is Kafka's SecurityDisabledException message.
const securityDisabledMsg = "No Authorizer is configured on the broker"

func handleDescribeACLs(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeACLsRequest)
	resp := kmsg.NewPtrDescribeACLsResponse()
	a := n.authorizer()
	pattern := req.ResourcePatternType
	if r.version == 0 {
		pattern = kmsg.ACLResourcePatternTypeLiteral
	}
	f := authz.Filter{
		ResourceType: authz.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: authz.PatternType(pattern), Principal: req.Principal, Host: req.Host,
		Operation: authz.Operation(req.Operation), Permission: authz.Permission(req.PermissionType),
	}
	switch {
	case a == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, kmsg.StringPtr(securityDisabledMsg)
	case !r.allowedCluster(a, authz.OpDescribe):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	default:
		if err := authz.ValidateFilter(f); err != nil {
			resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			break
		}
		var found []metadata.ACLEntry
		n.view(func(st *metadata.State) { found = st.DescribeACLs(f) })
		type key struct {
			rt   authz.ResourceType
			name string
			pt   authz.PatternType
		}
		index := map[key]int{}
		for _, e := range found {
			k := key{e.ResourceType, e.ResourceName, e.PatternType}
			i, ok := index[k]
			if !ok {
				res := kmsg.NewDescribeACLsResponseResource()
				res.ResourceType = kmsg.ACLResourceType(e.ResourceType)
				res.ResourceName = e.ResourceName
				res.ResourcePatternType = kmsg.ACLResourcePatternType(e.PatternType)
				i = len(resp.Resources)
				index[k] = i
				resp.Resources = append(resp.Resources, res)
			}
			acl := kmsg.NewDescribeACLsResponseResourceACL()
			acl.Principal, acl.Host = e.Principal, e.Host
			acl.Operation, acl.PermissionType = kmsg.ACLOperation(e.Operation), kmsg.ACLPermissionType(e.Permission)
			resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, acl)
		}
	}
	return encodeResponse(r, resp), nil
}

// aclAPIRefusal is the error every result of a CreateAcls or DeleteAcls
// gets before any is looked at: SECURITY_DISABLED without an authorizer,
// CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster; 0 if none.
func aclAPIRefusal(a *authz.Authorizer, r *request) (int16, *string) {
	if a == nil {
		return kerr.SecurityDisabled.Code, kmsg.StringPtr(securityDisabledMsg)
	}
	if !r.allowedCluster(a, authz.OpAlter) {
		return kerr.ClusterAuthorizationFailed.Code, nil
	}
	return 0, nil
}
