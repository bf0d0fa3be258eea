package broker

// Metadata (key 3), versions 0 through kmsg's newest (13).
//
// Behaviour: brokers are the registered, unfenced brokers of the metadata
// image, each with its advertised listener of the name the request came in
// on; topics are every topic (v0 empty list, v1+ null list) or the ones
// asked for, by name or (v10+) by id, with partitions' leader, leader epoch,
// replicas and ISR from the image. A partition without a leader carries
// LEADER_NOT_AVAILABLE. ControllerID is this broker: clients send admin
// requests there and every broker forwards them to the quorum (KRaft
// brokers report a random live broker for the same reason). Topic ids are
// returned from v10.
//
// Auto-creation: a topic asked for by name that does not exist is created
// through the controller with num.partitions and default.replication.factor
// when auto.create.topics.enable is true and the request allows it (always
// before v4, AllowAutoTopicCreation from v4). As in Kafka, the response
// that triggers the creation carries LEADER_NOT_AVAILABLE and no
// partitions; clients retry, and a later request finds the topic (or
// LEADER_NOT_AVAILABLE again until it reaches this broker's view). An
// illegal name gets INVALID_TOPIC_EXCEPTION, a refused creation its error.
//
// Differences from Kafka: authorized operations are always "unknown"
// (-2147483648) since there are no ACLs; no offline replicas are reported.

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

const authorizedOpsUnknown = -2147483648

// autoCreateWait bounds how long Metadata waits for the controller to
// create a topic.
const autoCreateWait = 2 * time.Second

func init() { register(3, 0, handleMetadata) }

func handleMetadata(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.MetadataRequest)
	resp := kmsg.NewPtrMetadataResponse()
	all := req.Topics == nil || (r.version == 0 && len(req.Topics) == 0)

	// Auto-create the missing topics. As in Kafka (KafkaApis'
	// handleTopicMetadataRequest and its AutoTopicCreationManager), the
	// response that triggers a creation answers LEADER_NOT_AVAILABLE with
	// no partitions, however fast the creation is; later requests see the
	// topic. Clients rely on it: segmentio/kafka-go reads the partitions of
	// a just-deleted topic and expects none.
	autoCreated := map[string]int16{} // name → the response's error code
	if !all && n.cfg.AutoCreateTopics && (r.version < 4 || req.AllowAutoTopicCreation) {
		var missing []string
		n.view(func(st *metadata.State) {
			for _, t := range req.Topics {
				if t.Topic == nil {
					continue
				}
				// __consumer_offsets is made by the group coordinator
				// (coordinator.go) with its own configs, never by Metadata.
				if _, ok := st.TopicByName(*t.Topic); !ok && *t.Topic != offsetsTopic {
					missing = append(missing, *t.Topic)
				}
			}
		})
		for name, err := range n.autoCreate(ctx, missing) {
			autoCreated[name] = kerr.LeaderNotAvailable.Code
			if err != nil {
				autoCreated[name] = errCode(err)
			}
		}
	}

	n.view(func(st *metadata.State) {
		for _, b := range st.Brokers() {
			if b.Fenced {
				continue
			}
			l, ok := pickListener(b.Listeners, r.conn.listener)
			if !ok {
				continue
			}
			rb := kmsg.NewMetadataResponseBroker()
			rb.NodeID, rb.Host, rb.Port = b.ID, l.Host, l.Port
			if b.Rack != "" {
				rb.Rack = kmsg.StringPtr(b.Rack)
			}
			resp.Brokers = append(resp.Brokers, rb)
		}
		if all {
			for _, t := range st.Topics() {
				resp.Topics = append(resp.Topics, metadataTopic(st, t))
			}
			return
		}
		for _, rt := range req.Topics {
			var t metadata.TopicInfo
			var ok bool
			if rt.Topic != nil {
				if code, created := autoCreated[*rt.Topic]; created {
					mt := kmsg.NewMetadataResponseTopic()
					mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
					mt.ErrorCode = code
					mt.AuthorizedOperations = authorizedOpsUnknown
					resp.Topics = append(resp.Topics, mt)
					continue
				}
				t, ok = st.TopicByName(*rt.Topic)
			} else {
				t, ok = st.TopicByID(uuid.UUID(rt.TopicID))
			}
			if !ok {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
				if rt.Topic == nil {
					mt.ErrorCode = kerr.UnknownTopicID.Code
				} else if n.cfg.AutoCreateTopics && (r.version < 4 || req.AllowAutoTopicCreation) {
					mt.ErrorCode = kerr.LeaderNotAvailable.Code // created, not here yet
				}
				mt.AuthorizedOperations = authorizedOpsUnknown
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, metadataTopic(st, t))
		}
	})
	resp.ClusterID = kmsg.StringPtr(n.ClusterID())
	resp.ControllerID = n.controllerID()
	resp.AuthorizedOperations = authorizedOpsUnknown
	return encodeResponse(r, resp), nil
}

// autoCreate creates missing topics with the broker's defaults, waiting
// (up to autoCreateWait) for the controller's answer but not for the
// topics to reach this broker's view. The result maps each name to nil
// (created, or already created meanwhile) or its error; a name is absent
// when the controller could not be asked (clients retry).
func (n *Node) autoCreate(ctx context.Context, names []string) map[string]error {
	out := map[string]error{}
	if len(names) == 0 {
		return out
	}
	req := metadata.CreateTopicsRequest{DefaultPartitions: n.cfg.NumPartitions, DefaultReplicationFactor: n.cfg.DefaultReplicationFactor}
	for _, name := range names {
		// The open-file budget (fdbudget.go), as for CreateTopics.
		release, err := n.reservePartitions(n.onThisNode(int64(n.cfg.NumPartitions), -1, nil))
		if err != nil {
			out[name] = err
			continue
		}
		defer release()
		req.Topics = append(req.Topics, metadata.CreateTopic{Name: name, NumPartitions: -1, ReplicationFactor: -1})
	}
	if len(req.Topics) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, autoCreateWait)
	defer cancel()
	res, err := n.svc.CreateTopics(ctx, req)
	if err != nil {
		n.logger.Warn("broker: auto-create topics", "topics", names, "err", err)
		return out // clients see LEADER_NOT_AVAILABLE and retry
	}
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			out[r.Name] = r.Err
			continue
		}
		out[r.Name] = nil
	}
	return out
}

// waitTopics waits until every named topic exists in the metadata view
// with a leader for each partition, or ctx ends.
func (n *Node) waitTopics(ctx context.Context, names []string) bool {
	return n.waitMetadata(ctx, func(st *metadata.State) bool {
		for _, name := range names {
			t, ok := st.TopicByName(name)
			if !ok {
				return false
			}
			for _, p := range st.Partitions(t.ID) {
				if p.Leader == metadata.NoLeader {
					return false
				}
			}
		}
		return true
	})
}

func metadataTopic(st *metadata.State, t metadata.TopicInfo) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.IsInternal = t.Name == offsetsTopic
	mt.AuthorizedOperations = authorizedOpsUnknown
	for _, p := range st.Partitions(t.ID) {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.Leader, p.LeaderEpoch
		mp.Replicas = append([]int32{}, p.Replicas...)
		mp.ISR = append([]int32{}, p.ISR...)
		mp.OfflineReplicas = []int32{}
		if p.Leader == metadata.NoLeader {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// pickListener returns the listener named name, else the first one.
func pickListener(ls []metadata.Listener, name string) (metadata.Listener, bool) {
	for _, l := range ls {
		if l.Name == name {
			return l, true
		}
	}
	if len(ls) > 0 {
		return ls[0], true
	}
	return metadata.Listener{}, false
}
