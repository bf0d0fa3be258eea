package broker

// OffsetFetch (key 9), versions 0 through kmsg's newest (10; several
// groups per request from v8, topics by id from v10).
//
// Behaviour: each group's committed offsets from the coordinator's
// in-memory store (loaded from __consumer_offsets, updated once a commit is
// appended). Topics null (v2+) asks for every partition the group
// committed. A partition without a committed offset answers offset -1,
// leader epoch -1, empty metadata and no error. The group's partition must
// be led and loaded here: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS or
// COORDINATOR_NOT_AVAILABLE go in the top-level ErrorCode (v2-v7), the
// group's ErrorCode (v8+), or every partition (v0-v1, which have no
// top-level code). RequireStable (v7+): a partition with a pending
// transactional offset (TxnOffsetCommit not yet completed by its marker)
// answers UNSTABLE_OFFSET_COMMIT with offset -1, as Kafka does (the client
// retries); without it the committed offset is answered. With topics null
// only partitions with a committed offset are listed, as Kafka does.
//
// v9+ MemberID/MemberEpoch are checked against a KIP-848 consumer group
// (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; consumer.Group.ValidateOffsetFetch).
//
// Differences from Kafka: v10 by topic
// id answers the ids of topics that still exist and skips committed
// topics that were deleted.

import (
	"context"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(9, 0, handleOffsetFetch) }

// fetchedTopic is one topic of an OffsetFetch answer before it is put in
// the version's response shape.
type fetchedTopic struct {
	name  string
	id    [16]byte
	parts []kmsg.OffsetFetchResponseGroupTopicPartition
}

func handleOffsetFetch(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.OffsetFetchRequest)
	resp := kmsg.NewPtrOffsetFetchResponse()
	if r.version >= 8 {
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			var topics []offsetFetchTopic
			if g.Topics != nil {
				topics = []offsetFetchTopic{}
				for _, t := range g.Topics {
					topics = append(topics, offsetFetchTopic{name: t.Topic, id: t.TopicID, parts: t.Partitions})
				}
			}
			var fetched []fetchedTopic
			var err error
			if allowed := r.allowed(n.authorizer(), authz.OpDescribe, authz.ResGroup, g.Group); allowed && n.groupIsShare(g.Group) {
				err = kerr.GroupIDNotFound // a share group has no committed offsets (Kafka's ShareGroup.validateOffsetFetch)
			} else if r.version >= 9 && allowed {
				err = n.groups.cgs.validateFetch(g.Group, g.MemberID, g.MemberEpoch) // KIP-848 groups only
			}
			if err == nil {
				fetched, err = n.fetchOffsetsAuthorized(r, g.Group, topics, r.version >= 10, req.RequireStable)
			}
			rg.ErrorCode = errCode(err)
			for _, ft := range fetched {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.TopicID, rt.Partitions = ft.name, ft.id, ft.parts
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return encodeResponse(r, resp), nil
	}
	var topics []offsetFetchTopic
	if req.Topics != nil || r.version < 2 {
		topics = []offsetFetchTopic{}
		for _, t := range req.Topics {
			topics = append(topics, offsetFetchTopic{name: t.Topic, parts: t.Partitions})
		}
	}
	var fetched []fetchedTopic
	var err error
	if r.allowed(n.authorizer(), authz.OpDescribe, authz.ResGroup, req.Group) && n.groupIsShare(req.Group) {
		err = kerr.GroupIDNotFound // as v8+ above
	} else {
		fetched, err = n.fetchOffsetsAuthorized(r, req.Group, topics, false, r.version >= 7 && req.RequireStable)
	}
	if r.version >= 2 {
		resp.ErrorCode = errCode(err)
	} else if err != nil {
		// v0-v1: no top-level code, so every requested partition says it.
		fetched = nil
		for _, t := range topics {
			ft := fetchedTopic{name: t.name}
			for _, p := range t.parts {
				rp := noOffset(p)
				rp.ErrorCode = errCode(err)
				ft.parts = append(ft.parts, rp)
			}
			fetched = append(fetched, ft)
		}
	}
	for _, ft := range fetched {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = ft.name
		for _, p := range ft.parts {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return encodeResponse(r, resp), nil
}

// fetchOffsetsAuthorized is fetchOffsets behind Kafka's checks
// (authorize.go): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED)
// and on each topic: a requested topic without it answers
// TOPIC_AUTHORIZATION_FAILED in each partition, and one of "every
// committed topic" (topics nil) is left out.
func (n *Node) fetchOffsetsAuthorized(r *request, groupID string, topics []offsetFetchTopic, byID, requireStable bool) ([]fetchedTopic, error) {
	az := n.authorizer()
	if !r.allowed(az, authz.OpDescribe, authz.ResGroup, groupID) {
		return nil, kerr.GroupAuthorizationFailed
	}
	fetched, err := n.fetchOffsets(groupID, topics, byID, requireStable)
	if az == nil || err != nil {
		return fetched, err
	}
	out := fetched[:0]
	for _, ft := range fetched {
		if ft.name != "" && !r.allowed(az, authz.OpDescribe, authz.ResTopic, ft.name) {
			if topics == nil {
				continue
			}
			for i := range ft.parts {
				p := noOffset(ft.parts[i].Partition)
				p.ErrorCode = kerr.TopicAuthorizationFailed.Code
				ft.parts[i] = p
			}
		}
		out = append(out, ft)
	}
	return out, nil
}

// offsetFetchTopic is one requested topic (by name, or by id when byID).
type offsetFetchTopic struct {
	name  string
	id    [16]byte
	parts []int32
}

func noOffset(partition int32) kmsg.OffsetFetchResponseGroupTopicPartition {
	p := kmsg.NewOffsetFetchResponseGroupTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = partition, -1, -1, kmsg.StringPtr("")
	return p
}

// fetchOffsets answers one group: the requested topics' partitions, or,
// topics nil, every committed partition. err is the group-level error.
func (n *Node) fetchOffsets(groupID string, topics []offsetFetchTopic, byID, requireStable bool) ([]fetchedTopic, error) {
	if _, err := n.groups.partitionOf(groupID); err != nil {
		return nil, err
	}
	answer := func(o group.Offset, partition int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		p := noOffset(partition)
		p.Offset, p.LeaderEpoch, p.Metadata = o.Offset, o.LeaderEpoch, kmsg.StringPtr(o.Metadata)
		return p
	}
	unstable := func(topic string, partition int32) bool {
		return requireStable && n.groups.store.Pending(groupID, group.TopicPartition{Topic: topic, Partition: partition})
	}
	var out []fetchedTopic
	if topics == nil {
		var ids map[string]uuid.UUID
		if byID {
			ids = map[string]uuid.UUID{}
			n.view(func(st *metadata.State) {
				for _, t := range st.Topics() {
					ids[t.Name] = t.ID
				}
			})
		}
		last, skip := "", false
		for _, c := range n.groups.store.FetchAll(groupID) { // sorted by topic
			if c.Topic != last { // topic names are never empty
				last, skip = c.Topic, false
				ft := fetchedTopic{name: c.Topic}
				if byID {
					id, ok := ids[c.Topic]
					if !ok {
						skip = true // deleted since: no id to answer with
						continue
					}
					ft.name, ft.id = "", id
				}
				out = append(out, ft)
			}
			if !skip {
				rp := answer(c.Offset, c.Partition)
				if unstable(c.Topic, c.Partition) {
					rp = noOffset(c.Partition)
					rp.ErrorCode = kerr.UnstableOffsetCommit.Code
				}
				out[len(out)-1].parts = append(out[len(out)-1].parts, rp)
			}
		}
		return out, nil
	}
	for _, t := range topics {
		ft := fetchedTopic{name: t.name, id: t.id}
		name := t.name
		var topicErr error
		if byID {
			name, _, topicErr = n.resolveTopic(true, "", t.id)
		}
		for _, p := range t.parts {
			rp := noOffset(p)
			if topicErr != nil {
				rp.ErrorCode = errCode(topicErr)
			} else if unstable(name, p) {
				rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			} else if o, ok := n.groups.store.Fetch(groupID, group.TopicPartition{Topic: name, Partition: p}); ok {
				rp = answer(o, p)
			}
			ft.parts = append(ft.parts, rp)
		}
		out = append(out, ft)
	}
	return out, nil
}
