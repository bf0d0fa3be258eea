package share

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ShareFetch/ShareAcknowledge handlers' adapters between kmsg and the
// core, so the wiring slice only moves fields.

// AcksFromShareFetch converts a ShareFetch partition's acknowledgement
// batches. A renew type (4) is refused with INVALID_REQUEST unless the
// request set IsRenewAck (v2, KIP-1222).
func AcksFromShareFetch(in []kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch, isRenewAck bool) ([]AckBatch, error) {
	out := make([]AckBatch, 0, len(in))
	for _, b := range in {
		a, err := ackBatch(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes, isRenewAck)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// AcksFromShareAcknowledge converts a ShareAcknowledge partition's
// acknowledgement batches, as [AcksFromShareFetch].
func AcksFromShareAcknowledge(in []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch, isRenewAck bool) ([]AckBatch, error) {
	out := make([]AckBatch, 0, len(in))
	for _, b := range in {
		a, err := ackBatch(b.FirstOffset, b.LastOffset, b.AcknowledgeTypes, isRenewAck)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func ackBatch(first, last int64, types []int8, isRenewAck bool) (AckBatch, error) {
	if len(types) == 0 {
		return AckBatch{}, kerr.InvalidRequest
	}
	a := AckBatch{First: first, Last: last, Types: make([]AckType, len(types))}
	for i, t := range types {
		if AckType(t) == AckRenew && !isRenewAck {
			return AckBatch{}, kerr.InvalidRequest
		}
		a.Types[i] = AckType(t)
	}
	return a, nil
}

// ToKmsg converts acquired runs to ShareFetch's AcquiredRecords.
func ToKmsg(in []AcquiredRecords) []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord {
	out := make([]kmsg.ShareFetchResponseTopicPartitionAcquiredRecord, len(in))
	for i, a := range in {
		out[i] = kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{FirstOffset: a.First, LastOffset: a.Last, DeliveryCount: a.DeliveryCount}
	}
	return out
}
