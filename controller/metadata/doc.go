// Package metadata is the controller's metadata image and decision logic,
// modelled on Kafka's KRaft MetadataImage and QuorumController, but pure.
//
// It owns:
//   - the typed, versioned records of the metadata log (broker
//     registration and fencing, topics, partitions, configs, topic removal,
//     remote-segment states, no-ops, feature levels) and their byte
//     encoding ([Encode], [Decode]);
//   - [State], the image: the deterministic fold of those records
//     ([State.Apply]), its read accessors, and its snapshot encoding
//     ([State.Marshal], [Unmarshal]);
//   - every decision the controller leader makes, as a pure function of the
//     image and a request: replica placement, leader election on fencing and
//     unfencing, config validation, the AlterPartition epoch guard and the
//     remote-segment lifecycle ([State.PlanCreateTopics],
//     [State.PlanFenceBroker], [State.PlanAlterPartition], ...). A planner
//     returns the records to propose, in order, and a result carrying Kafka
//     error codes ([kerr] errors, see [ErrorCode]).
//
// It must never start goroutines, do I/O, read the clock or a global random
// source, or know about Raft: time and liveness (broker sessions) and
// randomness (*rand.Rand) are passed in by the caller, the controller
// package, which proposes the planned records through Raft and applies the
// committed ones. Nothing here is safe for concurrent use; the caller
// serialises access.
//
// Planners see only applied state. A caller must therefore either apply a
// plan's records before planning the next request, or plan against a
// [State.Clone] to which it applies its in-flight records speculatively
// (as Kafka's controller does with its in-memory timeline).
//
// Deleting a topic removes its partitions and configs but leaves its remote
// segments in the image (KIP-405): the tiering layer deletes the objects
// and records DELETE_STARTED then DELETE_FINISHED, after which a segment
// leaves the image. Until the topic's last segment has left, the image
// keeps the removed topic's name ([State.TopicNameByID]), because object
// keys carry it, and refuses a new topic under its ID. A restore creates
// a topic under a given ID ([CreateTopic].TopicID): the one its objects
// sit under in the bucket.
//
// Usage, as the controller leader and every follower would. One plan's
// records take effect together, so they travel as one Raft entry
// ([EncodeBatch]) and apply at that entry's index ([State.ApplyBatch]):
//
//	st := metadata.NewState()
//	recs, res, err := st.PlanRegisterBroker(metadata.RegisterBrokerRequest{
//		BrokerID: 1, IncarnationID: uuid.New(), Rack: "a",
//	})
//	if err != nil {
//		return metadata.ErrorCode(err) // a Kafka error code for the broker
//	}
//	entry := metadata.EncodeBatch(recs) // propose; once committed at index:
//	recs, err = metadata.DecodeBatch(entry)
//	err = st.ApplyBatch(int64(index), recs) // a refusal is deterministic
//	_ = res.BrokerEpoch
//
// Snapshots are [State.Marshal] and [Unmarshal]; a restored image resumes
// applying at the entry after its [State.Offset].
package metadata
