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
	// controller_mutation_rate (quotas.go): each topic's partitions, strict
	// from v5; a topic refused is THROTTLING_QUOTA_EXCEEDED and never
	// reaches the controller.
	mq := n.mutationQuota(r, r.version >= 5)
	takenByName, takenByID := map[string]int64{}, map[uuid.UUID]int64{}
	if mq != nil {
		partitions := func(name string, id uuid.UUID) int64 {
			var p int64
			n.view(func(st *metadata.State) {
				if t, ok := st.TopicByName(name); ok && name != "" {
					p = int64(t.NumPartitions)
				} else if t, ok := st.TopicByID(id); ok && name == "" {
					p = int64(t.NumPartitions)
				}
			})
			return p
		}
		throttled := func(rt kmsg.DeleteTopicsResponseTopic) {
			rt.ErrorCode, rt.ErrorMessage = kerr.ThrottlingQuotaExceeded.Code, kmsg.StringPtr(kerr.ThrottlingQuotaExceeded.Description)
			resp.Topics = append(resp.Topics, rt)
		}
		keptNames, keptIDs := names[:0:0], ids[:0:0]
		for _, name := range names {
			p := partitions(name, uuid.Nil)
			if err := mq.take(p); err != nil {
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.Topic = kmsg.StringPtr(name)
				throttled(rt)
				continue
			}
			takenByName[name] = p
			keptNames = append(keptNames, name)
		}
		for _, id := range ids {
			p := partitions("", id)
			if err := mq.take(p); err != nil {
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.TopicID = id
				throttled(rt)
				continue
			}
			takenByID[id] = p
			keptIDs = append(keptIDs, id)
		}
		names, ids = keptNames, keptIDs
		if len(names) == 0 && len(ids) == 0 {
			mq.done()
			return encodeResponse(r, resp), nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(req.TimeoutMillis))
	defer cancel()
	results, err := n.svc.DeleteTopics(cctx, names, ids)
	if err != nil {
		for _, p := range takenByName {
			mq.giveBack(p)
		}
		for _, p := range takenByID {
			mq.giveBack(p)
		}
		mq.done()
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
			if p, ok := takenByName[res.Name]; ok {
				mq.giveBack(p)
			} else {
				mq.giveBack(takenByID[res.TopicID])
			}
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
	mq.done()
	return encodeResponse(r, resp), nil
}
