package metadata

import (
	"testing"

	"github.com/google/uuid"
)

// Fixed IDs of snapshotFixture.
var (
	fixtureOrders = uuid.MustParse("5d1c0a4e-7b1f-4c55-9a0e-3f2b9e1d0a01")
	fixtureGone   = uuid.MustParse("0a9f3c1e-2d4b-4e6a-8c7d-1b2a3c4d5e02")
	fixtureSegA   = uuid.MustParse("11111111-1111-4111-8111-111111111111")
	fixtureSegB   = uuid.MustParse("22222222-2222-4222-8222-222222222222")
	fixtureSegC   = uuid.MustParse("33333333-3333-4333-8333-333333333333")
)

// snapshotFixture builds, from explicit records (no planner, no rng), an
// image touching every snapshot section: features, brokers with listeners,
// a live topic with partitions, configs and a remote segment, and a removed
// topic ("gone") whose remote segments remain. testdata/snapshot/v0.snap is
// this image as the version 0 encoder wrote it.
func snapshotFixture(t testing.TB) *State {
	t.Helper()
	seg := func(id, topic uuid.UUID, p int32, base int64, st RemoteSegmentState) *RemoteSegmentRecord {
		return &RemoteSegmentRecord{SegmentID: id, TopicID: topic, Partition: p, BaseOffset: base, EndOffset: base + 99,
			MaxTimestamp: 1700000000000 + base, LeaderEpochs: []EpochStart{{Epoch: 0, StartOffset: base}},
			SizeBytes: 4096, State: st, BrokerID: 1, EventTimestamp: 1700000000500}
	}
	recs := []Record{
		&FeatureLevelRecord{Name: "metadata.version", Level: 7},
		&RegisterBrokerRecord{BrokerID: 1, IncarnationID: incarnationID(1, 1), BrokerEpoch: 1, Rack: "a",
			Listeners: []Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}}},
		&RegisterBrokerRecord{BrokerID: 2, IncarnationID: incarnationID(2, 1), BrokerEpoch: 2, Rack: "b", Fenced: true},
		&TopicRecord{Name: "orders", TopicID: fixtureOrders},
		&PartitionRecord{TopicID: fixtureOrders, Partition: 0, Replicas: []int32{1, 2}, ISR: []int32{1}, Leader: 1},
		&PartitionRecord{TopicID: fixtureOrders, Partition: 1, Replicas: []int32{2, 1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 4},
		&ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Name: ConfigRetentionMs, Value: ptr("60000")},
		&ConfigRecord{ResourceType: ResourceBroker, ResourceName: "", Name: "log.retention.ms", Value: ptr("1000")},
		&TopicRecord{Name: "gone", TopicID: fixtureGone},
		&PartitionRecord{TopicID: fixtureGone, Partition: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		seg(fixtureSegA, fixtureOrders, 1, 0, CopyStarted),
		seg(fixtureSegB, fixtureGone, 0, 0, CopyStarted),
		seg(fixtureSegB, fixtureGone, 0, 0, CopyFinished),
		seg(fixtureSegC, fixtureGone, 0, 100, CopyStarted),
		seg(fixtureSegC, fixtureGone, 0, 100, DeleteStarted),
		&RemoveTopicRecord{TopicID: fixtureGone},
	}
	st := NewState()
	for i, r := range recs {
		if err := st.Apply(int64(i+1), r); err != nil {
			t.Fatalf("fixture record %d (%T): %v", i, r, err)
		}
	}
	return st
}
