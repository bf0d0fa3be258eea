package controller

import (
	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
)

// JSON bodies of the RPCs on the wire (see wire.go for the framing and
// rpc.go for the methods). Requests are metadata's request types as they
// are; results that carry errors carry them as wireErr, in the *W types
// below and their conversions, which the rpc table entries name.

// deleteTopicsReq is DeleteTopics' request: the names and ids of the
// Service method's arguments.
type deleteTopicsReq struct {
	Names []string    `json:"names"`
	IDs   []uuid.UUID `json:"ids"`
}

type watchReq struct {
	From int64 `json:"from"`
	// KeepaliveMs, when > 0, asks the server for a kindKeepalive frame
	// whenever the stream has been idle that long (clients before it send
	// none and get none; servers before it ignore it and send none, and
	// such a client's deadline then reopens an idle stream now and then).
	KeepaliveMs int64 `json:"keepalive_ms,omitempty"`
}

// keepaliveW is the payload of a kindKeepalive frame: the serving
// controller's applied metadata offset (informative: a stream is idle
// only when the client has every delta up to it).
type keepaliveW struct {
	Offset int64 `json:"offset"`
}

// response is the envelope of every kindResponse frame.
type response struct {
	Err  *wireErr `json:"err,omitempty"`
	Body any      `json:"body,omitempty"`
}

type createTopicResultW struct {
	Name              string            `json:"name"`
	TopicID           uuid.UUID         `json:"topic_id"`
	Err               *wireErr          `json:"err,omitempty"`
	NumPartitions     int32             `json:"num_partitions"`
	ReplicationFactor int16             `json:"replication_factor"`
	Configs           map[string]string `json:"configs,omitempty"`
}

type deleteTopicResultW struct {
	Name    string    `json:"name"`
	TopicID uuid.UUID `json:"topic_id"`
	Err     *wireErr  `json:"err,omitempty"`
}

type nameResultW struct {
	Type metadata.ResourceType `json:"type,omitempty"`
	Name string                `json:"name"`
	Err  *wireErr              `json:"err,omitempty"`
}

type alterPartitionResultW struct {
	Err            *wireErr `json:"err,omitempty"`
	Leader         int32    `json:"leader"`
	LeaderEpoch    int32    `json:"leader_epoch"`
	PartitionEpoch int32    `json:"partition_epoch"`
	ISR            []int32  `json:"isr"`
	// LeaderRecoveryState is KIP-704's, omitted when RECOVERED (0).
	LeaderRecoveryState int8 `json:"leader_recovery_state,omitempty"`
}

type electLeadersResultW struct {
	Topic      string                  `json:"topic"`
	Partitions []electPartitionResultW `json:"partitions"`
}

type electPartitionResultW struct {
	Partition int32    `json:"partition"`
	Err       *wireErr `json:"err,omitempty"`
}

// deltaW is a Delta on the wire: records as metadata.Encode gives them,
// the image as metadata.State.Marshal gives it.
type deltaW struct {
	Offset  int64    `json:"offset"`
	Records [][]byte `json:"records,omitempty"`
	Image   []byte   `json:"image,omitempty"`
}

func createTopicsToW(rs []metadata.CreateTopicResult) []createTopicResultW {
	out := make([]createTopicResultW, len(rs))
	for i, r := range rs {
		out[i] = createTopicResultW{r.Name, r.TopicID, toWireErr(r.Err), r.NumPartitions, r.ReplicationFactor, r.Configs}
	}
	return out
}

func createTopicsFromW(rs []createTopicResultW) []metadata.CreateTopicResult {
	out := make([]metadata.CreateTopicResult, len(rs))
	for i, r := range rs {
		out[i] = metadata.CreateTopicResult{Name: r.Name, TopicID: r.TopicID, Err: fromWireErr(r.Err),
			NumPartitions: r.NumPartitions, ReplicationFactor: r.ReplicationFactor, Configs: r.Configs}
	}
	return out
}

func deleteTopicsToW(rs []metadata.DeleteTopicResult) []deleteTopicResultW {
	out := make([]deleteTopicResultW, len(rs))
	for i, r := range rs {
		out[i] = deleteTopicResultW{r.Name, r.TopicID, toWireErr(r.Err)}
	}
	return out
}

func deleteTopicsFromW(rs []deleteTopicResultW) []metadata.DeleteTopicResult {
	out := make([]metadata.DeleteTopicResult, len(rs))
	for i, r := range rs {
		out[i] = metadata.DeleteTopicResult{Name: r.Name, TopicID: r.TopicID, Err: fromWireErr(r.Err)}
	}
	return out
}

func createPartitionsToW(rs []metadata.CreatePartitionsResult) []nameResultW {
	out := make([]nameResultW, len(rs))
	for i, r := range rs {
		out[i] = nameResultW{Name: r.Name, Err: toWireErr(r.Err)}
	}
	return out
}

func createPartitionsFromW(rs []nameResultW) []metadata.CreatePartitionsResult {
	out := make([]metadata.CreatePartitionsResult, len(rs))
	for i, r := range rs {
		out[i] = metadata.CreatePartitionsResult{Name: r.Name, Err: fromWireErr(r.Err)}
	}
	return out
}

func alterConfigsToW(rs []metadata.AlterConfigsResult) []nameResultW {
	out := make([]nameResultW, len(rs))
	for i, r := range rs {
		out[i] = nameResultW{Type: r.Type, Name: r.Name, Err: toWireErr(r.Err)}
	}
	return out
}

func alterConfigsFromW(rs []nameResultW) []metadata.AlterConfigsResult {
	out := make([]metadata.AlterConfigsResult, len(rs))
	for i, r := range rs {
		out[i] = metadata.AlterConfigsResult{Type: r.Type, Name: r.Name, Err: fromWireErr(r.Err)}
	}
	return out
}

func alterPartitionToW(r metadata.AlterPartitionResult) alterPartitionResultW {
	return alterPartitionResultW{toWireErr(r.Err), r.Leader, r.LeaderEpoch, r.PartitionEpoch, r.ISR, r.LeaderRecoveryState}
}

func alterPartitionFromW(r alterPartitionResultW) metadata.AlterPartitionResult {
	return metadata.AlterPartitionResult{Err: fromWireErr(r.Err), Leader: r.Leader, LeaderEpoch: r.LeaderEpoch,
		PartitionEpoch: r.PartitionEpoch, ISR: r.ISR, LeaderRecoveryState: r.LeaderRecoveryState}
}

func electLeadersToW(rs []metadata.ElectLeadersResult) []electLeadersResultW {
	out := make([]electLeadersResultW, len(rs))
	for i, r := range rs {
		ps := make([]electPartitionResultW, len(r.Partitions))
		for j, p := range r.Partitions {
			ps[j] = electPartitionResultW{p.Partition, toWireErr(p.Err)}
		}
		out[i] = electLeadersResultW{r.Topic, ps}
	}
	return out
}

type reassignmentResultW struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Err       *wireErr `json:"err,omitempty"`
}

func reassignmentsToW(rs []metadata.ReassignmentResult) []reassignmentResultW {
	out := make([]reassignmentResultW, len(rs))
	for i, r := range rs {
		out[i] = reassignmentResultW{r.Topic, r.Partition, toWireErr(r.Err)}
	}
	return out
}

func electLeadersFromW(rs []electLeadersResultW) []metadata.ElectLeadersResult {
	out := make([]metadata.ElectLeadersResult, len(rs))
	for i, r := range rs {
		ps := make([]metadata.ElectLeadersPartitionResult, len(r.Partitions))
		for j, p := range r.Partitions {
			ps[j] = metadata.ElectLeadersPartitionResult{Partition: p.Partition, Err: fromWireErr(p.Err)}
		}
		out[i] = metadata.ElectLeadersResult{Topic: r.Topic, Partitions: ps}
	}
	return out
}

func reassignmentsFromW(rs []reassignmentResultW) []metadata.ReassignmentResult {
	out := make([]metadata.ReassignmentResult, len(rs))
	for i, r := range rs {
		out[i] = metadata.ReassignmentResult{Topic: r.Topic, Partition: r.Partition, Err: fromWireErr(r.Err)}
	}
	return out
}

func deltaToW(d Delta) (deltaW, error) {
	w := deltaW{Offset: d.Offset}
	if d.Image != nil {
		b, err := d.Image.Marshal()
		if err != nil {
			return w, err
		}
		w.Image = b
		return w, nil
	}
	for _, r := range d.Records {
		w.Records = append(w.Records, metadata.Encode(r))
	}
	return w, nil
}

func deltaFromW(w deltaW) (Delta, error) {
	d := Delta{Offset: w.Offset}
	if w.Image != nil {
		st, err := metadata.Unmarshal(w.Image)
		if err != nil {
			return d, err
		}
		d.Image = st
		return d, nil
	}
	for _, b := range w.Records {
		r, err := metadata.Decode(b)
		if err != nil {
			return d, err
		}
		d.Records = append(d.Records, r)
	}
	return d, nil
}

type errResultW struct {
	Err *wireErr `json:"err,omitempty"`
}

func createACLsToW(rs []metadata.CreateACLResult) []errResultW {
	out := make([]errResultW, len(rs))
	for i, r := range rs {
		out[i] = errResultW{toWireErr(r.Err)}
	}
	return out
}

func createACLsFromW(rs []errResultW) []metadata.CreateACLResult {
	out := make([]metadata.CreateACLResult, len(rs))
	for i, r := range rs {
		out[i] = metadata.CreateACLResult{Err: fromWireErr(r.Err)}
	}
	return out
}

type deleteACLsResultW struct {
	Err     *wireErr            `json:"err,omitempty"`
	Deleted []metadata.ACLEntry `json:"deleted,omitempty"`
}

func deleteACLsToW(rs []metadata.DeleteACLsResult) []deleteACLsResultW {
	out := make([]deleteACLsResultW, len(rs))
	for i, r := range rs {
		out[i] = deleteACLsResultW{toWireErr(r.Err), r.Deleted}
	}
	return out
}

func deleteACLsFromW(rs []deleteACLsResultW) []metadata.DeleteACLsResult {
	out := make([]metadata.DeleteACLsResult, len(rs))
	for i, r := range rs {
		out[i] = metadata.DeleteACLsResult{Err: fromWireErr(r.Err), Deleted: r.Deleted}
	}
	return out
}

type alterScramResultW struct {
	User string   `json:"user"`
	Err  *wireErr `json:"err,omitempty"`
}

func alterScramToW(rs []metadata.AlterScramResult) []alterScramResultW {
	out := make([]alterScramResultW, len(rs))
	for i, r := range rs {
		out[i] = alterScramResultW{r.User, toWireErr(r.Err)}
	}
	return out
}

func errsToW(errs []error) []errResultW {
	out := make([]errResultW, len(errs))
	for i, err := range errs {
		out[i] = errResultW{toWireErr(err)}
	}
	return out
}

func alterScramFromW(rs []alterScramResultW) []metadata.AlterScramResult {
	out := make([]metadata.AlterScramResult, len(rs))
	for i, r := range rs {
		out[i] = metadata.AlterScramResult{User: r.User, Err: fromWireErr(r.Err)}
	}
	return out
}

func errsFromW(rs []errResultW) []error {
	out := make([]error, len(rs))
	for i, r := range rs {
		out[i] = fromWireErr(r.Err)
	}
	return out
}
