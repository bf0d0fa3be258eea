package txncoord

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ByLeader splits a marker by the leader of each partition (leaderOf
// returns a broker id), so each leader gets one WriteTxnMarkers entry.
func (m Marker) ByLeader(leaderOf func(TopicPartition) int32) map[int32]Marker {
	out := map[int32]Marker{}
	for _, tp := range m.Partitions {
		l := leaderOf(tp)
		lm, ok := out[l]
		if !ok {
			lm = m
			lm.Partitions = nil
		}
		lm.Partitions = append(lm.Partitions, tp)
		out[l] = lm
	}
	return out
}

// WriteTxnMarkersRequest builds the WriteTxnMarkers (key 27) request that
// delivers markers to one partition leader (partitions grouped by topic,
// in the markers' order). The broker sets the version (0–1).
func WriteTxnMarkersRequest(markers []Marker) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	for _, m := range markers {
		km := kmsg.NewWriteTxnMarkersRequestMarker()
		km.ProducerID, km.ProducerEpoch, km.Committed, km.CoordinatorEpoch = m.ProducerID, m.Epoch, m.Commit, m.CoordinatorEpoch
		for _, tp := range m.Partitions {
			if n := len(km.Topics); n == 0 || km.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
				t.Topic = tp.Topic
				km.Topics = append(km.Topics, t)
			}
			t := &km.Topics[len(km.Topics)-1]
			t.Partitions = append(t.Partitions, tp.Partition)
		}
		req.Markers = append(req.Markers, km)
	}
	return req
}

// MarkerAcks turns the response to [WriteTxnMarkersRequest](markers) into
// one [MarkerAck] per partition, to feed [Coordinator.MarkerDone]. A
// partition the response does not mention is acked REQUEST_TIMED_OUT (sent
// again).
func MarkerAcks(markers []Marker, resp *kmsg.WriteTxnMarkersResponse) []MarkerAck {
	type key struct {
		pid int64
		tp  TopicPartition
	}
	codes := map[key]int16{}
	for _, rm := range resp.Markers {
		for _, t := range rm.Topics {
			for _, p := range t.Partitions {
				codes[key{rm.ProducerID, TopicPartition{t.Topic, p.Partition}}] = p.ErrorCode
			}
		}
	}
	var out []MarkerAck
	for _, m := range markers {
		for _, tp := range m.Partitions {
			code, ok := codes[key{m.ProducerID, tp}]
			if !ok {
				code = kerr.RequestTimedOut.Code
			}
			out = append(out, ack(m, tp, code))
		}
	}
	return out
}

// FailedMarkerAcks acks every partition of markers with code, for a
// WriteTxnMarkers request that failed as a whole (NETWORK_EXCEPTION for a
// broken connection, REQUEST_TIMED_OUT for no answer).
func FailedMarkerAcks(markers []Marker, code int16) []MarkerAck {
	var out []MarkerAck
	for _, m := range markers {
		for _, tp := range m.Partitions {
			out = append(out, ack(m, tp, code))
		}
	}
	return out
}

func ack(m Marker, tp TopicPartition, code int16) MarkerAck {
	return MarkerAck{TxnID: m.TxnID, CoordinatorEpoch: m.CoordinatorEpoch, ProducerID: m.ProducerID, Epoch: m.Epoch, Partition: tp, Err: code}
}
