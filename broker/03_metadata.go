package broker

// Metadata (key 3), versions 0 through kmsg's newest (13).
//
// Behaviour: brokers are the registered, unfenced brokers of the metadata
// image, each with its advertised listener of the name the request came in
// on; topics are every topic (v0 empty list, v1+ null list) or the ones
// asked for, by name or (v10+) by id, with partitions' leader, leader epoch
// (v7+), replicas and ISR from the image, and (v5+) offline replicas: those
// whose broker is fenced or not registered, and this broker's own replica
// when its log or log dir has failed (other brokers' failed dirs are not
// in the image). A partition without a leader, or whose leader is not
// registered, carries LEADER_NOT_AVAILABLE with leader -1 and its replica
// lists, as Kafka's KRaftMetadataCache answers. v0 (Kafka's
// errorUnavailableEndpoints) leaves replicas that are not alive out of the
// replica and ISR lists and then answers REPLICA_NOT_AVAILABLE.
// ControllerID is this broker: clients send admin
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
// (-2147483648) since there are no ACLs; log dirs of other brokers are
// not known (no KIP-858 directory assignments), so their replicas are
// offline only when their broker is.

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
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
	// Kafka's checks (authorize.go): a topic the principal may not
	// DESCRIBE is left out of an all-topics answer and answers
	// TOPIC_AUTHORIZATION_FAILED when named, existing or not; creating a
	// missing one needs CREATE on the cluster or the topic.
	az := n.authorizer()
	describeOK := func(name string) bool { return r.allowed(az, authz.OpDescribe, authz.ResTopic, name) }
	if !all && n.cfg.AutoCreateTopics && (r.version < 4 || req.AllowAutoTopicCreation) {
		var missing []string
		clusterCreate := r.allowedCluster(az, authz.OpCreate)
		n.view(func(st *metadata.State) {
			for _, t := range req.Topics {
				if t.Topic == nil || !describeOK(*t.Topic) {
					continue
				}
				// __consumer_offsets is made by the group coordinator
				// (coordinator.go) with its own configs, never by Metadata.
				if _, ok := st.TopicByName(*t.Topic); !ok && *t.Topic != offsetsTopic && *t.Topic != txnStateTopic && *t.Topic != shareStateTopic {
					if !clusterCreate && !r.allowed(az, authz.OpCreate, authz.ResTopic, *t.Topic) {
						autoCreated[*t.Topic] = kerr.TopicAuthorizationFailed.Code
						continue
					}
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

	rs := n.replicaStatus()
	n.view(func(st *metadata.State) {
		rs.st = st
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
				if describeOK(t.Name) {
					resp.Topics = append(resp.Topics, metadataTopic(rs, r.version, t))
				}
			}
			return
		}
		for _, rt := range req.Topics {
			var t metadata.TopicInfo
			var ok bool
			if rt.Topic != nil && !describeOK(*rt.Topic) {
				mt := kmsg.NewMetadataResponseTopic()
				mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				mt.AuthorizedOperations = authorizedOpsUnknown
				resp.Topics = append(resp.Topics, mt)
				continue
			}
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
			if !describeOK(t.Name) { // asked by id
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				mt.AuthorizedOperations = authorizedOpsUnknown
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, metadataTopic(rs, r.version, t))
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

func metadataTopic(rs *replicaStatus, version int16, t metadata.TopicInfo) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic = kmsg.StringPtr(t.Name)
	mt.TopicID = t.ID
	mt.IsInternal = t.Name == offsetsTopic || t.Name == txnStateTopic || t.Name == shareStateTopic
	mt.AuthorizedOperations = authorizedOpsUnknown
	for _, p := range rs.st.Partitions(t.ID) {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.LeaderEpoch = p.Partition, p.LeaderEpoch
		mp.Leader = rs.leader(p)
		mp.Replicas = append([]int32{}, p.Replicas...)
		mp.ISR = append([]int32{}, p.ISR...)
		if version == 0 {
			mp.Replicas, mp.ISR = rs.alive(p.Replicas), rs.alive(p.ISR)
		}
		mp.OfflineReplicas = rs.offline(t.Name, p)
		switch {
		case mp.Leader == metadata.NoLeader:
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		case len(mp.Replicas) < len(p.Replicas) || len(mp.ISR) < len(p.ISR):
			mp.ErrorCode = kerr.ReplicaNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// replicaStatus says, for one request, which replicas clients may count
// on: the brokers of the image that are alive (registered and unfenced)
// and this broker's own replicas whose log or log dir has failed. Build it
// with [Node.replicaStatus] before taking the view, then set st inside
// [Node.view]; it is used by one goroutine.
type replicaStatus struct {
	st         *metadata.State
	self       int32
	selfVoid   bool            // this broker is presumed fenced: its leaderships are void
	failedDirs map[string]bool // this broker's failed log dirs
	n          *Node
}

// replicaStatus reads this broker's failed log dirs (before the metadata
// view is taken: storage's locks are never taken under metaMu here).
func (n *Node) replicaStatus() *replicaStatus {
	rs := &replicaStatus{self: n.cfg.NodeID, selfVoid: n.presumedFenced(), failedDirs: map[string]bool{}, n: n}
	for _, d := range n.store.Dirs() {
		if d.Failed {
			rs.failedDirs[d.Path] = true
		}
	}
	return rs
}

// aliveBroker reports whether broker id is registered and unfenced.
func (rs *replicaStatus) aliveBroker(id int32) bool {
	b, ok := rs.st.Broker(id)
	return ok && !b.Fenced
}

// leader is the partition's leader as clients see it: -1 when there is
// none, it is not registered, or it is this broker presumed fenced.
func (rs *replicaStatus) leader(p metadata.PartitionInfo) int32 {
	if p.Leader == metadata.NoLeader || (p.Leader == rs.self && rs.selfVoid) {
		return metadata.NoLeader
	}
	if _, ok := rs.st.Broker(p.Leader); !ok {
		return metadata.NoLeader
	}
	return p.Leader
}

// alive returns the members of ids that are alive brokers.
func (rs *replicaStatus) alive(ids []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, id := range ids {
		if rs.aliveBroker(id) {
			out = append(out, id)
		}
	}
	return out
}

// offline returns the partition's offline replicas, in replica order:
// fenced or unregistered brokers, and this broker when its log of the
// partition or that log's dir has failed. Never nil (Kafka sends []).
func (rs *replicaStatus) offline(topic string, p metadata.PartitionInfo) []int32 {
	out := []int32{}
	for _, id := range p.Replicas {
		if !rs.aliveBroker(id) || (id == rs.self && rs.localFailed(topic, p.Partition)) {
			out = append(out, id)
		}
	}
	return out
}

// localFailed reports whether this broker's log of the partition, or its
// log dir, has failed.
func (rs *replicaStatus) localFailed(topic string, partition int32) bool {
	if rs.n == nil {
		return false
	}
	l, ok := rs.n.store.Get(topic, partition)
	if !ok {
		return false
	}
	return l.Failed() || rs.failedDirs[rs.n.store.DirOf(l)]
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
