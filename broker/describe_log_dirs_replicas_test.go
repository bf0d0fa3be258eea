package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logDirPartitions asks n's DescribeLogDirs for every log and returns
// "topic-partition" → the partition's entry.
func logDirPartitions(t *testing.T, n *Node) map[string]kmsg.DescribeLogDirsResponseDirTopicPartition {
	t.Helper()
	resp := dialRaw(t, n).roundTrip(kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse)
	out := map[string]kmsg.DescribeLogDirsResponseDirTopicPartition{}
	for _, d := range resp.Dirs {
		for _, tp := range d.Topics {
			for _, p := range tp.Partitions {
				out[fmt.Sprintf("%s-%d", tp.Topic, p.Partition)] = p
			}
		}
	}
	return out
}

// TestDescribeLogDirsListsEveryReplica: on three brokers at RF=3 each
// broker lists its replica of the partition, leader or follower, with the
// leader's size covering what was produced and Kafka's offset lag
// (max(HW - LEO, 0): 0 for current logs); a log on disk that the broker
// does not host as a partition has lag -1 (INVALID_OFFSET_LAG).
func TestDescribeLogDirsListsEveryReplica(t *testing.T) {
	c := startCluster(t, 3, nil)
	c.createTopicRF("ld", 1, 3)
	st, _ := c.partitionState("ld", 0)
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	for range 3 {
		if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "ld", Value: []byte("0123456789")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int32{1, 2, 3} {
		got, ok := logDirPartitions(t, c.node(id))["ld-0"]
		if !ok {
			t.Errorf("broker %d (leader %d) does not list its replica ld-0", id, st.Leader)
			continue
		}
		if got.OffsetLag != 0 {
			t.Errorf("broker %d: offset lag %d, want 0", id, got.OffsetLag)
		}
		if id == st.Leader && got.Size <= 0 {
			t.Errorf("leader %d: size %d after three records", id, got.Size)
		}
	}

	n := c.node(1)
	if _, err := n.store.GetOrCreate("unhosted", 0, n.cfg.Storage); err != nil {
		t.Fatal(err)
	}
	if got, ok := logDirPartitions(t, n)["unhosted-0"]; !ok || got.OffsetLag != -1 {
		t.Errorf("a log not hosted as a partition: listed %v, lag %d, want -1", ok, got.OffsetLag)
	}
}
