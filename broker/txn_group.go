package broker

// The group side of transactions (KIP-447): the coordinator append path
// of __consumer_offsets (transactional offset commits are the
// coordinator's own transactional batches) and the completion of a
// producer's pending offsets by its marker. TxnOffsetCommit itself is
// 28_txn_offset_commit.go; the pending-offset table is group.Store.

import (
	"fmt"

	"github.com/strata-io/strata/internal/batch"
)

// completeGroupTxn makes the pending transactional offsets of producerID
// on __consumer_offsets partition offsetsPartition visible (commit) or
// drops them (abort), once the marker is durable. The marker path calls
// it after the marker is replicated and before it answers, so the offsets
// of the producer's next transaction are above the log end read here and
// are not touched: they need AddOffsetsToTxn, which the transaction
// coordinator refuses (CONCURRENT_TRANSACTIONS) until every marker of the
// previous one is acknowledged. producerEpoch is not needed: Kafka's
// coordinator keys pending offsets by producer id alone.
func (n *Node) completeGroupTxn(offsetsPartition int32, producerID int64, producerEpoch int16, commit bool) {
	p := n.partition(offsetsTopic, offsetsPartition)
	if p == nil {
		return // not hosted: nothing loaded, a later load replays the marker
	}
	p.appendMu.Lock()
	end := p.log.LogEndOffset()
	p.appendMu.Unlock()
	n.groups.store.CompleteTxn(offsetsPartition, producerID, commit, end)
}

// appendCoordinatorBatch appends one batch the group coordinator built,
// as leader at epoch, and calls appended with its first offset under
// appendMu (in log order with every leader append, markers included). A
// transactional batch (TxnOffsetCommit) is recorded in the producer state
// without Kafka's client sequence checks: as Kafka's AppendOrigin
// COORDINATOR, its sequence (0 in each batch) is not the client's and a
// second commit in one transaction is no duplicate. The log still fences
// an older producer epoch (storage's transaction table).
func (p *partition) appendCoordinatorBatch(records []byte, epoch int32, appended func(baseOffset int64)) (produceResult, error) {
	res := produceResult{baseOffset: -1, logAppendTime: -1, logStartOffset: -1}
	h, err := batch.ParseHeader(records)
	if err != nil {
		return res, fmt.Errorf("broker: coordinator batch: %w", err)
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.checkLeaderAppendLocked(epoch); err != nil {
		return res, err
	}
	c := p.prod
	track := h.HasProducerID() && c != nil
	var next int64
	if track {
		next = p.log.LogEndOffset()
		c.mu.Lock()
		if c.st == nil {
			track = false
		} else {
			tx := c.st.Begin()
			tx.Update(h, next, h.MaxTimestamp)
			defer func() {
				c.mu.Lock()
				if err != nil || res.baseOffset != next {
					tx.Abort()
				} else {
					tx.Commit()
				}
				c.mu.Unlock()
			}()
		}
		c.mu.Unlock()
	}
	info, aerr := p.append(records, epoch)
	if aerr != nil {
		err = aerr
		return res, err
	}
	res.baseOffset, res.lastOffset, res.logAppendTime, res.logStartOffset = info.FirstOffset, info.LastOffset, info.LogAppendTime, info.LogStartOffset
	appended(info.FirstOffset)
	return res, nil
}
