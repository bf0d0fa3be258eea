package txncoord

import (
	"fmt"
	"testing"
)

// BenchmarkTxnCycle measures the core's cost of one whole transaction
// (AddPartitionsToTxn of parts partitions, EndTxn commit, every marker
// ack, the CompleteCommit ack) over 1000 transactional ids: the planner
// work the broker adds per transaction, without I/O.
func BenchmarkTxnCycle(b *testing.B) {
	for _, parts := range []int{1, 10} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			var next int64
			c := New(Config{}, func() (int64, error) { next++; return next, nil })
			for p := int32(0); p < DefaultPartitions; p++ {
				if _, err := c.Load(0, p, 1, nil); err != nil {
					b.Fatal(err)
				}
			}
			ids := make([]string, 1000)
			pids := make([]int64, len(ids))
			for i := range ids {
				ids[i] = fmt.Sprintf("txn-%d", i)
				e := c.InitProducerID(0, InitRequest{TxnID: ids[i], TimeoutMs: 60000, ProducerID: -1, Epoch: -1, Version: 4})
				e = c.AppendDone(0, e.Appends[0].Token, 0)
				pids[i] = e.Answers[0].ProducerID
			}
			tps := make([]TopicPartition, parts)
			for i := range tps {
				tps[i] = TopicPartition{"topic", int32(i)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				i := n % len(ids)
				now := int64(n)
				e := c.AddPartitions(now, AddRequest{TxnID: ids[i], ProducerID: pids[i], Epoch: 0, Partitions: tps, Version: 3})
				c.AppendDone(now, e.Appends[0].Token, 0)
				e = c.EndTxn(now, EndRequest{TxnID: ids[i], ProducerID: pids[i], Epoch: 0, Commit: true, Version: 3})
				e = c.AppendDone(now, e.Appends[0].Token, 0)
				m := e.Markers[0]
				var last Effects
				for _, tp := range m.Partitions {
					last = c.MarkerDone(now, MarkerAck{TxnID: m.TxnID, CoordinatorEpoch: m.CoordinatorEpoch, ProducerID: m.ProducerID, Epoch: m.Epoch, Partition: tp})
				}
				c.AppendDone(now, last.Appends[0].Token, 0)
			}
		})
	}
}
