package txncoord

import "github.com/strata-io/strata/broker/group"

// PartitionFor returns the __transaction_state partition of a
// transactional id: Kafka's Utils.abs(transactionalId.hashCode) %
// numPartitions, the function the group coordinator uses for
// __consumer_offsets.
func PartitionFor(txnID string, numPartitions int32) int32 {
	return group.PartitionFor(txnID, numPartitions)
}
