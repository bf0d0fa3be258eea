package broker

// Transactional produce: Kafka's checks before a transactional batch
// (attributes bit 0x10) reaches a log, and KIP-890 part 1.
//
//   - A request carrying a transactional batch without a transactional id
//     is refused whole with TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every
//     partition (KafkaApis.handleProduceRequest: hasTransactionalRecords
//     and no authorized transactional id).
//   - Verification (KIP-890 part 1, ReplicaManager's
//     appendRecordsWithTransactionVerification): before a partition's
//     first transactional batch of a transaction (the log has no ongoing
//     transaction of that producer), the leader asks the transaction's
//     coordinator (verifyTxnPartitions) whether the partition was added.
//     A partition the coordinator does not list answers
//     TRANSACTION_ABORTABLE to Produce v11+ and INVALID_TXN_STATE before;
//     PRODUCER_FENCED answers INVALID_PRODUCER_EPOCH; the coordinator's
//     retriable errors (CONCURRENT_TRANSACTIONS, COORDINATOR_*,
//     NOT_COORDINATOR, NETWORK_EXCEPTION) answer NOT_ENOUGH_REPLICAS, which
//     every client retries without a metadata refresh (Kafka's choice).
//   - A successful verification is a guard (txnVerifications), cached per
//     (producer, epoch) on the partition until the producer's transaction
//     ends there: a marker drops it (partition.appendMarker). The append
//     (under appendMu) goes ahead only if the log has the producer's
//     transaction open or the guard the request verified is still the
//     current one, so an ABORT marker written between the verification
//     and the append makes the append fail (KAFKA-14884), and a late
//     batch of an aborted transaction cannot open the next one.
//
// Verification runs on the connection's executor before the request's
// appends: one call per producer of the request (in practice one).

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnVerifyFunc is verifyTxnPartitions' type (Node.txnVerifyHook).
type txnVerifyFunc func(ctx context.Context, txnID string, producerID int64, epoch int16, tps map[string][]int32) map[string]map[int32]int16

// txnVerifications are one partition's KIP-890 verification guards, by
// producer id. The zero value is ready.
type txnVerifications struct {
	mu   sync.Mutex
	next uint64
	m    map[int64]txnGuard
}

// txnGuard is a verification of producer epoch epoch made while this
// broker led the partition in leaderEpoch; token names it. A guard holds
// only in the leader epoch it was made in: markers written while another
// broker led reach this log by replication, not appendMarker, so a guard
// from an earlier leadership may outlive its transaction.
type txnGuard struct {
	epoch       int16
	leaderEpoch int32
	token       uint64
}

// cached returns the guard of a verification of (pid, epoch) still in
// force in leaderEpoch (0: none).
func (v *txnVerifications) cached(pid int64, epoch int16, leaderEpoch int32) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if g, ok := v.m[pid]; ok && g.epoch == epoch && g.leaderEpoch == leaderEpoch {
		return g.token
	}
	return 0
}

// add records a successful verification of (pid, epoch) in leaderEpoch
// and returns its guard; an existing one for the same epochs is kept.
func (v *txnVerifications) add(pid int64, epoch int16, leaderEpoch int32) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if g, ok := v.m[pid]; ok && g.epoch == epoch && g.leaderEpoch == leaderEpoch {
		return g.token
	}
	if v.m == nil {
		v.m = map[int64]txnGuard{}
	}
	for id, g := range v.m {
		if g.leaderEpoch != leaderEpoch {
			delete(v.m, id) // of an earlier leadership: can never hold again
		}
	}
	v.next++
	v.m[pid] = txnGuard{epoch: epoch, leaderEpoch: leaderEpoch, token: v.next}
	return v.next
}

// valid reports whether guard token is still pid's verification at epoch
// in leaderEpoch.
func (v *txnVerifications) valid(pid int64, epoch int16, leaderEpoch int32, token uint64) bool {
	if token == 0 {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	g, ok := v.m[pid]
	return ok && g.epoch == epoch && g.leaderEpoch == leaderEpoch && g.token == token
}

// end drops pid's verification: its transaction ended on the partition.
func (v *txnVerifications) end(pid int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, pid)
}

// txnAppend is what a transactional batch's append must check
// (partition.appendRecords): the producer's transaction is open in the log,
// or guard is still in force.
type txnAppend struct {
	guard   uint64
	version int16 // the Produce version, for the error
}

// errNotInTxn is the answer to a transactional batch of a partition the
// producer's transaction does not hold, by Produce version.
func errNotInTxn(version int16) error {
	if version >= 11 {
		return fmt.Errorf("broker: partition not in the producer's ongoing transaction: %w", kerr.TransactionAbortable)
	}
	return fmt.Errorf("broker: partition not in the producer's ongoing transaction: %w", kerr.InvalidTxnState)
}

// verifyErr maps a coordinator's verification code to the produce
// answer (see the file comment); nil for success.
func verifyErr(code int16, version int16) error {
	switch code {
	case 0:
		return nil
	case kerr.InvalidTxnState.Code, kerr.TransactionAbortable.Code:
		return errNotInTxn(version)
	case kerr.ProducerFenced.Code:
		return fmt.Errorf("broker: verification: %w", kerr.InvalidProducerEpoch)
	case kerr.ConcurrentTransactions.Code, kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return fmt.Errorf("broker: unable to verify the partition has been added to the transaction: %s: %w", kerr.ErrorForCode(code), kerr.NotEnoughReplicas)
	}
	return fmt.Errorf("broker: verification: %w", kerr.ErrorForCode(code))
}

// txnProduceKey names one partition of a produce request.
type txnProduceKey struct {
	topic string
	part  int32
}

// txnProducePlan is what handleProduce learned about a request's
// transactional batches before appending: per partition, the error to
// answer or the guard to append with.
type txnProducePlan struct {
	errs   map[txnProduceKey]error
	guards map[txnProduceKey]uint64
}

// hasTransactionalBatch reports whether any partition of req carries a
// transactional data batch.
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if h, ok, _ := clientBatch(p.Records); ok && h.Transactional() && !h.Control() {
				return true
			}
		}
	}
	return false
}

// planTxnProduce verifies the request's transactional batches that need
// it (their partition's log has no open transaction of the producer and
// no guard is cached) with the coordinator, grouped per producer epoch.
// names maps each request topic index to its resolved name ("" when it
// does not resolve: nothing to verify).
func (n *Node) planTxnProduce(ctx context.Context, req *kmsg.ProduceRequest, names []string, version int16) txnProducePlan {
	plan := txnProducePlan{errs: map[txnProduceKey]error{}, guards: map[txnProduceKey]uint64{}}
	type pe struct {
		pid   int64
		epoch int16
	}
	// The leader epoch each verified partition was seen led in: a guard
	// is made for that epoch only.
	leaderEpochs := map[txnProduceKey]int32{}
	need := map[pe]map[string][]int32{}
	for ti, t := range req.Topics {
		name := names[ti]
		if name == "" {
			continue
		}
		for _, tp := range t.Partitions {
			h, ok, _ := clientBatch(tp.Records)
			if !ok || !h.Transactional() || h.Control() || !h.HasProducerID() {
				continue
			}
			p := n.partition(name, tp.Partition)
			if p == nil || !p.leader.Load() {
				continue // answered by the append path
			}
			k := txnProduceKey{name, tp.Partition}
			if _, open := p.log.OngoingTxn(h.ProducerID); open {
				continue
			}
			if g := p.verified.cached(h.ProducerID, h.ProducerEpoch, p.leaderEpoch.Load()); g != 0 {
				plan.guards[k] = g
				continue
			}
			leaderEpochs[k] = p.leaderEpoch.Load()
			key := pe{h.ProducerID, h.ProducerEpoch}
			if need[key] == nil {
				need[key] = map[string][]int32{}
			}
			need[key][name] = append(need[key][name], tp.Partition)
		}
	}
	txnID := ""
	if req.TransactionID != nil {
		txnID = *req.TransactionID
	}
	for key, tps := range need {
		verify := n.verifyTxnPartitions
		if h := n.txnVerifyHook.Load(); h != nil {
			verify = *h
		}
		codes := verify(ctx, txnID, key.pid, key.epoch, tps)
		for topic, ps := range tps {
			for _, part := range ps {
				k := txnProduceKey{topic, part}
				code, ok := codes[topic][part]
				if !ok {
					code = kerr.InvalidTxnState.Code
				}
				if err := verifyErr(code, version); err != nil {
					plan.errs[k] = err
					continue
				}
				if p := n.partition(topic, part); p != nil {
					plan.guards[k] = p.verified.add(key.pid, key.epoch, leaderEpochs[k])
				}
			}
		}
	}
	return plan
}
