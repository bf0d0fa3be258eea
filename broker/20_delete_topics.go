package broker

// DeleteTopics (key 20), versions 0 through kmsg's newest (6).
//
// Behaviour: topics by name (v0-v5, and v6 entries with a name) or by id
// (v6 entries without one) are removed through the controller; per-topic
// errors are UNKNOWN_TOPIC_OR_PARTITION (name) or UNKNOWN_TOPIC_ID (id),
// with a message from v5. The handler then waits, within the request's
// timeout, until this broker's metadata view no longer has the topics; the
// partitions' logs are deleted by the metadata follower (renamed
// <topic>-<partition>.<uuid>-delete and removed in the background).
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

func init() { register(20, 0, handleDeleteTopics) }

func handleDeleteTopics(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	var names []string
	var ids []uuid.UUID
	if r.version < 6 {
		names = req.TopicNames
	} else {
		for _, t := range req.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			} else {
				ids = append(ids, uuid.UUID(t.TopicID))
			}
		}
	}
	// Kafka's check (authorize.go): DELETE on each topic (an id is
	// checked by the name it has here); a refused one is
	// TOPIC_AUTHORIZATION_FAILED and never reaches the controller.
	if az := n.authorizer(); az != nil {
		keptNames, keptIDs := names[:0:0], ids[:0:0]
		for _, name := range names {
			if r.allowed(az, authz.OpDelete, authz.ResTopic, name) {
				keptNames = append(keptNames, name)
				continue
			}
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
		}
		for _, id := range ids {
			var name string
			n.view(func(st *metadata.State) {
				if t, ok := st.TopicByID(id); ok {
					name = t.Name
				}
			})
			if name == "" || r.allowed(az, authz.OpDelete, authz.ResTopic, name) {
				keptIDs = append(keptIDs, id)
				continue
			}
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.TopicID, rt.ErrorCode = id, kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
		}
		names, ids = keptNames, keptIDs
		if len(names) == 0 && len(ids) == 0 {
			return encodeResponse(r, resp), nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(req.TimeoutMillis))
	defer cancel()
	results, err := n.svc.DeleteTopics(cctx, names, ids)
	if err != nil {
		for _, name := range names {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = kmsg.StringPtr(name), errCode(err), kmsg.StringPtr(err.Error())
			resp.Topics = append(resp.Topics, rt)
		}
		for _, id := range ids {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.TopicID, rt.ErrorCode, rt.ErrorMessage = id, errCode(err), kmsg.StringPtr(err.Error())
			resp.Topics = append(resp.Topics, rt)
		}
		return encodeResponse(r, resp), nil
	}
	var gone []uuid.UUID
	for _, res := range results {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		if res.Name != "" {
			rt.Topic = kmsg.StringPtr(res.Name)
		}
		rt.TopicID = res.TopicID
		if res.Err != nil {
			rt.ErrorCode = metadata.ErrorCode(res.Err)
			rt.ErrorMessage = kmsg.StringPtr(res.Err.Error())
		} else {
			gone = append(gone, res.TopicID)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	n.waitMetadata(cctx, func(st *metadata.State) bool {
		for _, id := range gone {
			if _, ok := st.TopicByID(id); ok {
				return false
			}
		}
		return true
	})
	return encodeResponse(r, resp), nil
}
