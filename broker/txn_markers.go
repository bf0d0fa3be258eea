package broker

// WriteTxnMarkers (key 27), versions 0–1: the partition side of ending a
// transaction. The transaction coordinator (broker/txncoord, wired by
// T3a) sends it to the leaders of a transaction's partitions once
// PrepareCommit/PrepareAbort is durable, or calls writeTxnMarkers
// directly for the partitions this node leads. v2 (KIP-890 part 2's
// TransactionVersion) is not advertised: transaction version 2 is not
// built.
//
// Per partition, as Kafka's KafkaApis.handleWriteTxnMarkersRequest and
// ReplicaManager.appendRecords with requiredAcks -1 and origin
// COORDINATOR:
//
//   - UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER as a produce;
//   - NOT_ENOUGH_REPLICAS before appending while the ISR is below the min ISR;
//   - the marker is appended as a control batch under the partition's
//     append lock (storage.Log.AppendMarker checks Kafka's fencing:
//     INVALID_PRODUCER_EPOCH for an older producer epoch,
//     TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch,
//     nothing written then) and recorded in the idempotence table
//     (producer.State.UpdateMarker), so a fencing marker's bumped epoch
//     refuses the fenced producer's later batches;
//   - the answer waits until the high watermark passes the marker (acks=all),
//     within request.timeout.ms (Kafka's default 30 s): REQUEST_TIMED_OUT,
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER as a produce;
//   - a marker durable on a __consumer_offsets partition completes the
//     producer's pending transactional offsets there (completeGroupTxn,
//     KIP-447) before the answer.
//
// A marker also drops the partition's KIP-890 verification of that
// producer (txn_produce.go), so a produce verified before an abort marker
// cannot append into the next transaction (KAFKA-14884).

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/storage/producer"
)

// v2 carries KIP-890 part 2's TransactionVersion: not built, so not
// advertised (kmsg knows v2).
func init() { registerMax(27, 0, 1, handleWriteTxnMarkers) }

// txnMarkerTimeout bounds the acks=all wait of a marker: Kafka appends
// markers with request.timeout.ms (default 30 s).
const txnMarkerTimeout = 30 * time.Second

// handleWriteTxnMarkers serves key 27 from other brokers' coordinators.
// The wait for replication runs off the connection's executor, in a
// deferred frame, as an acks=all produce.
//
// With an authorizer it needs CLUSTER_ACTION on the cluster, as in Kafka
// (authorize.go); refused, every partition answers
// CLUSTER_AUTHORIZATION_FAILED and nothing is written.
func handleWriteTxnMarkers(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.WriteTxnMarkersRequest)
	if !r.allowedCluster(n.authorizer(), authz.OpClusterAction) {
		resp := kmsg.NewPtrWriteTxnMarkersResponse()
		for _, m := range req.Markers {
			rm := kmsg.NewWriteTxnMarkersResponseMarker()
			rm.ProducerID = m.ProducerID
			for _, t := range m.Topics {
				rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rm.Topics = append(rm.Topics, rt)
			}
			resp.Markers = append(resp.Markers, rm)
		}
		return encodeResponse(r, resp), nil
	}
	d := &deferred{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		resp := n.writeTxnMarkers(ctx, req)
		for _, m := range resp.Markers {
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					if p.ErrorCode != 0 {
						r.metrics().partitionError("WriteTxnMarkers", p.ErrorCode)
					}
				}
			}
		}
		d.f = encodeResponse(r, resp)
	}()
	return &frame{later: d}, nil
}

// markerWait is one appended marker waiting for the high watermark.
type markerWait struct {
	p      *partition
	last   int64
	epoch  int32
	marker producer.Marker
	rp     *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
}

// writeTxnMarkers is the partition side of WriteTxnMarkers for the
// partitions this node leads: it appends every marker first, then waits
// for all of them to be replicated, and answers per partition (see the
// file comment). It blocks until then; ctx cancelled answers the waiting
// partitions NOT_LEADER_OR_FOLLOWER (the coordinator retries).
func (n *Node) writeTxnMarkers(ctx context.Context, req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := kmsg.NewPtrWriteTxnMarkersResponse()
	resp.Version = req.Version
	// Sized up front: waits point into the slices.
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	var waits []markerWait
	for i, m := range req.Markers {
		rm := &resp.Markers[i]
		*rm = kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		mk := producer.Marker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, CoordinatorEpoch: m.CoordinatorEpoch, Commit: m.Committed}
		for j, t := range m.Topics {
			rt := &rm.Topics[j]
			*rt = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(t.Partitions))
			for k, idx := range t.Partitions {
				rp := &rt.Partitions[k]
				*rp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = idx
				w, err := n.appendTxnMarker(t.Topic, idx, mk)
				if err != nil {
					rp.ErrorCode = errCode(err)
					continue
				}
				w.rp = rp
				waits = append(waits, w)
			}
		}
	}
	if len(waits) == 0 {
		return resp
	}
	wctx, cancel := context.WithTimeout(ctx, txnMarkerTimeout)
	defer cancel()
	go func() {
		select {
		case <-n.stopping:
			cancel()
		case <-wctx.Done():
		}
	}()
	for _, w := range waits {
		err := w.p.waitHWInEpoch(wctx, w.last, w.epoch)
		switch {
		case err == nil:
			err = w.p.acksAllResult()
		case errors.Is(err, context.DeadlineExceeded):
			err = kerr.RequestTimedOut
		case errors.Is(err, context.Canceled):
			err = kerr.NotLeaderForPartition
		}
		if err != nil {
			w.rp.ErrorCode = errCode(err)
			continue
		}
		if w.p.topic == offsetsTopic {
			n.completeGroupTxn(w.p.index, w.marker.ProducerID, w.marker.ProducerEpoch, w.marker.Commit)
		}
	}
	return resp
}

// appendTxnMarker appends marker m to topic/index as its leader and
// returns what to wait for.
func (n *Node) appendTxnMarker(topic string, index int32, m producer.Marker) (markerWait, error) {
	p := n.partition(topic, index)
	if p == nil {
		_, exists, _ := n.resolveTopic(false, topic, [16]byte{})
		return markerWait{}, n.missingPartitionErr(topic, exists, index)
	}
	if err := p.checkLeader(-1); err != nil {
		return markerWait{}, err
	}
	if err := p.acksAllCheck(); err != nil {
		return markerWait{}, err
	}
	epoch := p.leaderEpoch.Load()
	last, err := p.appendMarker(m, epoch)
	if err != nil {
		return markerWait{}, err
	}
	return markerWait{p: p, last: last, epoch: epoch, marker: m}, nil
}

// appendMarker writes m as leader in leader epoch epoch under appendMu
// and returns its offset: the log checks the fencing and updates the
// transaction table, the idempotence table records the marker, and the
// producer's KIP-890 verification is dropped (its transaction ended).
func (p *partition) appendMarker(m producer.Marker, epoch int32) (int64, error) {
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.checkLeaderAppendLocked(epoch); err != nil {
		return -1, err
	}
	info, err := p.log.AppendMarker(m, epoch)
	if err != nil {
		return -1, err
	}
	if c := p.prod; c != nil {
		c.mu.Lock()
		if c.st != nil {
			ts := info.LogAppendTime
			if ts < 0 {
				ts = time.Now().UnixMilli()
			}
			c.st.UpdateMarker(m, info.FirstOffset, ts)
		}
		c.mu.Unlock()
	}
	p.verified.end(m.ProducerID)
	p.afterLeaderAppend()
	p.tm.appended(info)
	return info.LastOffset, nil
}
