package broker

// completeGroupTxn makes the pending transactional offsets of producerID
// on __consumer_offsets partition offsetsPartition visible (commit) or
// drops them (abort), once the marker is durable. Owned by the group side
// of issue 16 (KIP-447); until it lands nothing calls it and no offsets
// are pending.
func (n *Node) completeGroupTxn(offsetsPartition int32, producerID int64, producerEpoch int16, commit bool) {
}
