package share

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestKmsgAdapters(t *testing.T) {
	in := []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch{
		{FirstOffset: 0, LastOffset: 2, AcknowledgeTypes: []int8{1}},
		{FirstOffset: 3, LastOffset: 4, AcknowledgeTypes: []int8{2, 4}},
	}
	if _, err := AcksFromShareFetch(in, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("renew without IsRenewAck: %v", err)
	}
	acks, err := AcksFromShareFetch(in, true)
	if err != nil || len(acks) != 2 || acks[1].Types[1] != AckRenew || acks[0].Last != 2 {
		t.Fatalf("got %+v, %v", acks, err)
	}
	if _, err := AcksFromShareAcknowledge([]kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0}}, false); !errors.Is(err, kerr.InvalidRequest) {
		t.Errorf("no types: %v", err)
	}
	p := New(DefaultConfig(), 0)
	got := ToKmsg(p.Acquire("m", []Batch{{0, 4}}, 10, BatchOptimized, 0))
	if len(got) != 1 || got[0].FirstOffset != 0 || got[0].LastOffset != 4 || got[0].DeliveryCount != 1 {
		t.Fatalf("acquired %+v", got)
	}
	if err := p.Acknowledge("m", acks, 1); err != nil {
		t.Fatal(err)
	}
	if p.StartOffset() != 3 || p.AcquiredCount() != 1 {
		t.Fatalf("spso %d acquired %d after accept 0-2, release 3, renew 4", p.StartOffset(), p.AcquiredCount())
	}
}
