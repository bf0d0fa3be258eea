package broker

import (
	"testing"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
)

func TestMetadataEveryVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"auto.create.topics.enable": "false"})
	createTopic(t, newAdmin(t, n), "md", 2, nil)
	id := topicID(t, n, "md")
	c := dialRaw(t, n)
	for v := int16(0); v <= kmsg.NewPtrMetadataRequest().MaxVersion(); v++ {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(v)
		if v == 0 {
			req.Topics = []kmsg.MetadataRequestTopic{} // v0: empty = all
		}
		resp := c.roundTrip(req).(*kmsg.MetadataResponse)
		var found *kmsg.MetadataResponseTopic
		for i := range resp.Topics {
			if resp.Topics[i].Topic != nil && *resp.Topics[i].Topic == "md" {
				found = &resp.Topics[i]
			}
		}
		if found == nil || len(found.Partitions) != 2 || found.Partitions[0].Leader != 1 || len(resp.Brokers) != 1 {
			t.Fatalf("v%d: all-topics metadata %+v", v, resp)
		}
		if v >= 10 && found.TopicID != id {
			t.Errorf("v%d: topic id %x, want %x", v, found.TopicID, id)
		}
		if v >= 1 {
			// An empty (non-null) list asks for no topics.
			req.Topics = []kmsg.MetadataRequestTopic{}
			if got := c.roundTrip(req).(*kmsg.MetadataResponse); len(got.Topics) != 0 {
				t.Errorf("v%d: empty list returned %d topics", v, len(got.Topics))
			}
		}
		// A missing topic (auto-creation off).
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("absent")}}
		if got := c.roundTrip(req).(*kmsg.MetadataResponse); len(got.Topics) != 1 || got.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("v%d: missing topic %+v", v, got.Topics)
		}
		if v >= 12 {
			// By topic id, with a null name.
			req.Topics = []kmsg.MetadataRequestTopic{{TopicID: id}}
			got := c.roundTrip(req).(*kmsg.MetadataResponse)
			if len(got.Topics) != 1 || got.Topics[0].Topic == nil || *got.Topics[0].Topic != "md" {
				t.Errorf("v%d: by id %+v", v, got.Topics)
			}
		}
	}
}

func TestListOffsetsEveryVersionAndSpecialTimestamps(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "lo", 1, nil)
	c := dialRaw(t, n)
	// Offsets 0-2 at 1000..1002, 3-4 at 500..501: the max timestamp is at 2.
	c.roundTrip(produceReq(9, "lo", [16]byte{}, 0, -1, recordBatch(1000, "a", "b", "c")))
	c.roundTrip(produceReq(9, "lo", [16]byte{}, 0, -1, recordBatch(500, "d", "e")))
	for v := int16(1); v <= kmsg.NewPtrListOffsetsRequest().MaxVersion(); v++ {
		cases := []struct{ ts, off, rts int64 }{
			{-1, 5, -1}, {-2, 0, -1}, {0, 0, 1000}, {1001, 1, 1001}, {1003, -1, -1},
		}
		if v >= 7 {
			cases = append(cases, struct{ ts, off, rts int64 }{-3, 2, 1002})
		}
		if v >= 8 {
			cases = append(cases, struct{ ts, off, rts int64 }{-4, 0, -1})
		}
		for _, tc := range cases {
			req := kmsg.NewPtrListOffsetsRequest()
			req.SetVersion(v)
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "lo"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp, rp.CurrentLeaderEpoch = tc.ts, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			p := c.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != tc.off || p.Timestamp != tc.rts {
				t.Errorf("v%d ts %d: code %d offset %d timestamp %d, want offset %d timestamp %d",
					v, tc.ts, p.ErrorCode, p.Offset, p.Timestamp, tc.off, tc.rts)
			}
			if v >= 4 && tc.off >= 0 && p.LeaderEpoch != 0 {
				t.Errorf("v%d ts %d: leader epoch %d, want 0", v, tc.ts, p.LeaderEpoch)
			}
		}
	}
}

func TestCreateAndDeleteTopicsEveryVersion(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"auto.create.topics.enable": "false"})
	c := dialRaw(t, n)
	for v := int16(0); v <= kmsg.NewPtrCreateTopicsRequest().MaxVersion(); v++ {
		name := "ct" + string(rune('a'+v))
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(v)
		req.TimeoutMillis = 10000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 2, 1
		rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("60000")}}
		req.Topics = append(req.Topics, rt)
		resp := c.roundTrip(req).(*kmsg.CreateTopicsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("create v%d: %+v", v, resp.Topics)
		}
		if v >= 5 && (resp.Topics[0].NumPartitions != 2 || len(resp.Topics[0].Configs) != 1) {
			t.Errorf("create v%d: %+v", v, resp.Topics[0])
		}
		if v >= 7 && resp.Topics[0].TopicID != topicID(t, n, name) {
			t.Errorf("create v%d: topic id", v)
		}
		if n.partition(name, 1) == nil {
			t.Fatalf("create v%d returned before the partitions were open", v)
		}
	}
	for v := int16(0); v <= kmsg.NewPtrDeleteTopicsRequest().MaxVersion(); v++ {
		name := "ct" + string(rune('a'+v))
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.SetVersion(v)
		req.TimeoutMillis = 10000
		if v >= 6 {
			req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: topicID(t, n, name)}}
		} else {
			req.TopicNames = []string{name}
		}
		resp := c.roundTrip(req).(*kmsg.DeleteTopicsResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("delete v%d: %+v", v, resp.Topics)
		}
		if n.partition(name, 0) != nil {
			t.Fatalf("delete v%d returned with the partition still hosted", v)
		}
	}
	// Deleting what does not exist: by name and by id.
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.SetVersion(6)
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("never")}, {TopicID: uuid.New()}}
	resp := c.roundTrip(req).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("delete unknown: %+v", resp.Topics)
	}
}

// TestTopicConfigsReachTheLog: configs set at creation drive the
// partition's storage config (segment rolls, LogAppendTime).
func TestTopicConfigsReachTheLog(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	segBytes, lat := "1024", "LogAppendTime"
	createTopic(t, newAdmin(t, n), "cfg", 1, map[string]*string{"segment.bytes": &segBytes, "message.timestamp.type": &lat})
	c := dialRaw(t, n)
	for range 10 {
		resp := c.roundTrip(produceReq(9, "cfg", [16]byte{}, 0, -1, recordBatch(1, "0123456789012345678901234567890123456789012345678901234567890123456789")))
		p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.LogAppendTime <= 1 {
			t.Fatalf("produce: code %d log append time %d", p.ErrorCode, p.LogAppendTime)
		}
	}
	if segs := n.partition("cfg", 0).log.NumSegments(); segs < 2 {
		t.Fatalf("segment.bytes=1024 but %d segments after 10 appends", segs)
	}
}

// TestTopicConfigChangeFollowsTheController: a config changed through the
// controller reaches the open log's storage config.
func TestTopicConfigChangeFollowsTheController(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "live", 1, nil)
	v := "4096"
	res, err := n.svc.AlterConfigs(testCtx(t), metadata.AlterConfigsRequest{Incremental: true, Resources: []metadata.AlterConfigResource{{
		Type: metadata.ResourceTopic, Name: "live", Configs: []metadata.AlterConfigEntry{{Name: "segment.bytes", Value: &v, Op: metadata.OpSet}},
	}}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	ok := n.waitMetadata(testCtx(t), func(*metadata.State) bool {
		return n.partition("live", 0).log.Config().SegmentBytes == 4096
	})
	if !ok {
		t.Fatalf("segment.bytes still %d", n.partition("live", 0).log.Config().SegmentBytes)
	}
}
