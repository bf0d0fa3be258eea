package broker

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// metadataFor asks for one topic by name at version v, allowing
// auto-creation (implied before v4).
func metadataFor(c *rawConn, v int16, topic string) kmsg.MetadataResponseTopic {
	c.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(v)
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	resp := c.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 {
		c.t.Fatalf("v%d: %d topics in the response, want 1", v, len(resp.Topics))
	}
	return resp.Topics[0]
}

// TestMetadataAutoCreateAnswersLeaderNotAvailable: as in Kafka, the
// Metadata response that auto-creates a topic (here one just deleted,
// as segmentio/kafka-go's TestConn does) says LEADER_NOT_AVAILABLE with no
// partitions; a later request sees the topic with num.partitions
// partitions.
func TestMetadataAutoCreateAnswersLeaderNotAvailable(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"num.partitions": "2"})
	adm := newAdmin(t, n)
	c := dialRaw(t, n)
	for _, v := range []int16{1, 2, 3, 4, 9, 12} {
		name := fmt.Sprintf("recreated-v%d", v)
		createTopic(t, adm, name, 1, nil)
		if resp, err := adm.DeleteTopic(testCtx(t), name); err != nil || resp.Err != nil {
			t.Fatalf("delete %s: %v %v", name, err, resp.Err)
		}
		first := metadataFor(c, v, name)
		if first.ErrorCode != kerr.LeaderNotAvailable.Code || len(first.Partitions) != 0 {
			t.Errorf("v%d: the request that auto-creates %s got error %d and %d partitions, want LEADER_NOT_AVAILABLE and none",
				v, name, first.ErrorCode, len(first.Partitions))
		}
		if err := testutil.Within(testWait, func() error {
			mt := metadataFor(c, v, name)
			if mt.ErrorCode == 0 && len(mt.Partitions) == 2 {
				return nil
			}
			if mt.ErrorCode != 0 && mt.ErrorCode != kerr.LeaderNotAvailable.Code {
				t.Fatalf("v%d: %s: error %d while being created", v, name, mt.ErrorCode)
			}
			return fmt.Errorf("v%d: auto-created %s not seen: error %d, %d partitions", v, name, mt.ErrorCode, len(mt.Partitions))
		}); err != nil {
			t.Fatal(err)
		}
	}
}
