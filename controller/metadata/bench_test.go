package metadata

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
)

// bigState builds an image of 5 brokers and topics×10 partitions (rf 1).
func bigState(b *testing.B, topics int) *State {
	b.Helper()
	st := NewState()
	for id := int32(1); id <= 5; id++ {
		st.brokers[id] = &BrokerInfo{ID: id, Epoch: int64(id), Rack: fmt.Sprintf("r%d", id%3)}
	}
	st.maxBrokerEpoch = 5
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < topics; i++ {
		recs, res := st.PlanCreateTopics(CreateTopicsRequest{Topics: []CreateTopic{{Name: fmt.Sprintf("topic-%05d", i), NumPartitions: 10, ReplicationFactor: 1}}}, rng)
		if res[0].Err != nil {
			b.Fatal(res[0].Err)
		}
		if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkApplyPartitionChange measures decode + apply of one ISR change,
// the commonest record in a busy cluster.
func BenchmarkApplyPartitionChange(b *testing.B) {
	st := bigState(b, 1000)
	ti := st.Topics()[500]
	enc := [2][]byte{
		EncodeBatch([]Record{&PartitionChangeRecord{TopicID: ti.ID, Partition: 3, ISR: nil}}),
		nil,
	}
	p, _ := st.Partition(ti.ID, 3)
	enc[0] = EncodeBatch([]Record{&PartitionChangeRecord{TopicID: ti.ID, Partition: 3, ISR: p.ISR[:1]}})
	enc[1] = EncodeBatch([]Record{&PartitionChangeRecord{TopicID: ti.ID, Partition: 3, ISR: p.ISR}})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		recs, err := DecodeBatch(enc[i%2])
		if err != nil {
			b.Fatal(err)
		}
		if err := st.ApplyBatch(st.Offset()+1, recs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshal measures snapshotting images of 1k and 10k partitions.
func BenchmarkMarshal(b *testing.B) {
	for _, topics := range []int{100, 1000} {
		b.Run(fmt.Sprintf("partitions=%d", topics*10), func(b *testing.B) {
			st := bigState(b, topics)
			snap, _ := st.Marshal()
			b.SetBytes(int64(len(snap)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := st.Marshal(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUnmarshal measures restoring a 10k-partition image.
func BenchmarkUnmarshal(b *testing.B) {
	st := bigState(b, 1000)
	snap, _ := st.Marshal()
	b.SetBytes(int64(len(snap)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Unmarshal(snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanFenceBroker measures planning the fencing of one of five
// brokers over 10k partitions (it leads about a fifth of them).
func BenchmarkPlanFenceBroker(b *testing.B) {
	st := bigState(b, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if recs := st.PlanFenceBroker(int32(1+i%5), nil); len(recs) == 0 {
			b.Fatal("nothing planned")
		}
	}
}

// The remote fetch path's segment lookup on a long-retention partition of
// 10,000 finished segments: FinishedRemoteSegmentAt against copying and
// sorting the whole list (RemoteSegments) and scanning it, which is what
// the broker did before.
func BenchmarkRemoteSegmentLookup(b *testing.B) {
	const n = 10000
	topic := uuid.New()
	s := NewState()
	m := map[uuid.UUID]*RemoteSegmentInfo{}
	for i := range int64(n) {
		id := uuid.New()
		m[id] = &RemoteSegmentInfo{SegmentID: id, TopicID: topic, BaseOffset: i * 1000, EndOffset: i*1000 + 999,
			State: CopyFinished, LeaderEpochs: []EpochStart{{Epoch: 1, StartOffset: i * 1000}}}
	}
	s.remote[TopicPartition{topic, 0}] = m
	b.Run("FinishedRemoteSegmentAt", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, _, ok := s.FinishedRemoteSegmentAt(topic, 0, int64(i%n)*1000+5); !ok {
				b.Fatal("not found")
			}
		}
	})
	b.Run("sorted-list-scan", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			off := int64(i%n)*1000 + 5
			found := false
			for _, seg := range s.RemoteSegments(topic, 0) {
				if seg.State == CopyFinished && seg.BaseOffset <= off && off <= seg.EndOffset {
					found = true
				}
			}
			if !found {
				b.Fatal("not found")
			}
		}
	})
}
