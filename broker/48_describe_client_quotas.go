package broker

// DescribeClientQuotas (key 48), versions 0 and 1.
//
// Behaviour, as Kafka's KafkaApis and ClientQuotasImage.describe: a
// principal without DESCRIBE_CONFIGS on the cluster gets
// CLUSTER_AUTHORIZATION_FAILED; otherwise the entities of this broker's
// metadata image the filter matches (metadata.DescribeClientQuotas: exact,
// default and any match types, strict; INVALID_REQUEST or
// UNSUPPORTED_VERSION for a bad filter, as the top-level error) with their
// values. An entity's components are listed user, client-id, ip; a null
// name is the default.
//
// Differences from Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(48, 0, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeClientQuotasRequest)
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	if !r.allowedCluster(n.authorizer(), authz.OpDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return encodeResponse(r, resp), nil
	}
	comps := make([]metadata.QuotaFilterComponent, len(req.Components))
	for i, c := range req.Components {
		comps[i] = metadata.QuotaFilterComponent{EntityType: c.EntityType, MatchType: int8(c.MatchType), Match: c.Match}
	}
	var found []metadata.ClientQuotaEntry
	var err error
	n.view(func(st *metadata.State) { found, err = st.DescribeClientQuotas(comps, req.Strict) })
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errCode(err), kmsg.StringPtr(kerrDetail(err))
		return encodeResponse(r, resp), nil
	}
	for _, q := range found {
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range q.Entity.Parts() {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			e.Entity = append(e.Entity, ent)
		}
		for _, k := range sortedQuotaKeys(q.Values) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, q.Values[k]
			e.Values = append(e.Values, v)
		}
		resp.Entries = append(resp.Entries, e)
	}
	return encodeResponse(r, resp), nil
}
