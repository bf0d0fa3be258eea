package broker

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/share"
)

// describeShareOffset is DescribeShareGroupOffsets (v1) of one
// partition, or of every share-partition (all).
func describeShareOffset(t *testing.T, cl *kgo.Client, group, topic string, p int32, all bool) (kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition, bool) {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = group
	if !all {
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{p}
		rg.Topics = append(rg.Topics, rt)
	}
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || len(resp.Groups) != 1 {
		t.Fatalf("describe share group offsets: %v %+v", err, resp)
	}
	if err := kerr.ErrorForCode(resp.Groups[0].ErrorCode); err != nil {
		t.Fatalf("describe share group offsets: %v", err)
	}
	for _, rt := range resp.Groups[0].Topics {
		for _, rp := range rt.Partitions {
			if rt.Topic == topic && rp.Partition == p {
				return rp, true
			}
		}
	}
	return kmsg.DescribeShareGroupOffsetsResponseGroupTopicPartition{}, false
}

// TestShareGroupOffsetsAdmin: AlterShareGroupOffsets creates a group's
// share state at a start offset (a reset bumps the state epoch),
// DescribeShareGroupOffsets reads it back per partition and for all
// share-partitions with the lag, DeleteShareGroupOffsets removes it; what
// franz-go's TestShareGroupOffsetsAdmin asks, plus Kafka's answers for
// unknown topics and groups.
func TestShareGroupOffsetsAdmin(t *testing.T) {
	n := startNode(t, t.TempDir(), shareProps)
	cl := newClient(t, n, kgo.DefaultProduceTopic("t"))
	adm := kadm.NewClient(cl)
	createTopic(t, adm, "t", 1, nil)
	createTopic(t, adm, "u", 2, nil)
	ctx := testCtx(t)
	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("v")).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	res, err := adm.AlterShareGroupOffsets(ctx, "g", kadm.Offsets{"t": {0: {At: 8}}, "nope": {0: {At: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := res.Lookup("t", 0); e != nil {
		t.Fatalf("alter t-0: %v", e)
	}
	if e, _ := res.Lookup("nope", 0); !errors.Is(e, kerr.UnknownTopicOrPartition) {
		t.Fatalf("alter of an unknown topic: %v", e)
	}

	rp, ok := describeShareOffset(t, cl, "g", "t", 0, false)
	if !ok || rp.ErrorCode != 0 || rp.StartOffset != 8 || rp.Lag != 12 {
		t.Fatalf("describe t-0: %+v %v", rp, ok)
	}
	rp, ok = describeShareOffset(t, cl, "g", "t", 0, true)
	if !ok || rp.StartOffset != 8 {
		t.Fatalf("describe all, t-0: %+v %v", rp, ok)
	}
	if _, ok := describeShareOffset(t, cl, "g", "u", 0, true); ok {
		t.Fatal("describe all lists u, which has no share state")
	}
	if rp, ok := describeShareOffset(t, cl, "g", "u", 1, false); !ok || rp.ErrorCode != 0 || rp.StartOffset != -1 {
		t.Fatalf("describe u-1 (no state): %+v %v", rp, ok)
	}
	if rp, ok := describeShareOffset(t, cl, "g", "nope", 0, false); !ok || rp.ErrorCode != 0 || rp.StartOffset != -1 {
		t.Fatalf("describe of an unknown topic: %+v %v", rp, ok)
	}
	described, err := adm.DescribeShareGroupOffsets(ctx, "g")
	if err != nil || described["g"].Offsets["t"][0].StartOffset != 8 {
		t.Fatalf("kadm describe: %+v %v", described, err)
	}

	// A reset bumps the state epoch, fencing a leader of the old state.
	k := share.Key{Group: "g", TopicID: topicID(t, n, "t"), Partition: 0}
	if err := n.sharePersister.Write(ctx, k, 0, 1, share.Update{StartOffset: -1, DeliveryCompleteCount: 1,
		Batches: []share.StateBatch{{FirstOffset: 8, LastOffset: 8, DeliveryState: share.Acknowledged, DeliveryCount: 1}}}); err != nil {
		t.Fatal(err)
	}
	if rp, _ := describeShareOffset(t, cl, "g", "t", 0, false); rp.Lag != 11 {
		t.Fatalf("lag after one acknowledgement: %+v", rp)
	}
	if res, err := adm.AlterShareGroupOffsets(ctx, "g", kadm.Offsets{"t": {0: {At: 3}}}); err != nil || res.Error() != nil {
		t.Fatalf("reset: %v %v", err, res.Error())
	}
	if err := n.sharePersister.Write(ctx, k, 0, 1, share.Update{StartOffset: -1}); !errors.Is(err, kerr.FencedStateEpoch) {
		t.Fatalf("write of the old state epoch after a reset: %v", err)
	}
	if st, err := n.sharePersister.Read(ctx, k, 1); err != nil || st.StateEpoch != 1 || st.StartOffset != 3 || len(st.Batches) != 0 {
		t.Fatalf("after the reset: %+v %v", st, err)
	}

	del, err := adm.DeleteShareGroupOffsets(ctx, "g", "t")
	if err != nil || del.Error() != nil {
		t.Fatalf("delete: %v %v", err, del.Error())
	}
	if rp, ok := describeShareOffset(t, cl, "g", "t", 0, false); !ok || rp.StartOffset != -1 {
		t.Fatalf("describe after delete: %+v %v", rp, ok)
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, "g", "t"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("delete of a group with no share state: %v", err)
	}

	// A classic group's id is not a share group's: GROUP_ID_NOT_FOUND.
	if err := adm.CommitAllOffsets(ctx, "classic", kadm.Offsets{"t": {0: {At: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.AlterShareGroupOffsets(ctx, "classic", kadm.Offsets{"t": {0: {At: 3}}}); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("alter of a classic group's id: %v", err)
	}
	if _, err := adm.DeleteShareGroupOffsets(ctx, "classic", "t"); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatalf("delete of a classic group's id: %v", err)
	}
}
