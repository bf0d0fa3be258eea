package txncoord

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a transaction's state, with Kafka's ids (the TransactionStatus
// byte of a __transaction_state value) and names (DescribeTransactions,
// ListTransactions).
type State = kmsg.TransactionState

// The states of Kafka's TransactionState.
const (
	Empty             = kmsg.TransactionStateEmpty             // 0: no open transaction
	Ongoing           = kmsg.TransactionStateOngoing           // 1: partitions added, not ended
	PrepareCommit     = kmsg.TransactionStatePrepareCommit     // 2: commit decided, markers outstanding
	PrepareAbort      = kmsg.TransactionStatePrepareAbort      // 3: abort decided, markers outstanding
	CompleteCommit    = kmsg.TransactionStateCompleteCommit    // 4: commit markers all written
	CompleteAbort     = kmsg.TransactionStateCompleteAbort     // 5: abort markers all written
	Dead              = kmsg.TransactionStateDead              // 6: expiring (tombstone pending)
	PrepareEpochFence = kmsg.TransactionStatePrepareEpochFence // 7: fencing (never written)
)

// validPrevious is Kafka's TransactionState.validPreviousStates: the states
// a transaction may move to `to` from. PrepareEpochFence is a pending-only
// state here (the fence goes straight to PrepareAbort, see fence), so no
// transition ever completes into it.
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteCommit, CompleteAbort},
	PrepareEpochFence: {Ongoing},
}

// ValidTransition reports whether Kafka allows a transaction in from to
// move to to.
func ValidTransition(from, to State) bool {
	return slices.Contains(validPrevious[to], from)
}

// expirationAllowed: the states in which an idle transactional id may be
// expired (Kafka's isExpirationAllowed).
func expirationAllowed(s State) bool {
	return s == Empty || s == CompleteCommit || s == CompleteAbort
}

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

func compareTP(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// tpSet is a set of partitions; sorted() gives a deterministic order.
type tpSet map[TopicPartition]struct{}

func (s tpSet) sorted() []TopicPartition {
	out := make([]TopicPartition, 0, len(s))
	for tp := range s {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTP)
	return out
}

func (s tpSet) clone() tpSet {
	c := make(tpSet, len(s))
	for tp := range s {
		c[tp] = struct{}{}
	}
	return c
}

func (s tpSet) containsAll(tps []TopicPartition) bool {
	for _, tp := range tps {
		if _, ok := s[tp]; !ok {
			return false
		}
	}
	return true
}

func (s tpSet) equal(o tpSet) bool {
	if len(s) != len(o) {
		return false
	}
	return s.containsAll(o.sorted())
}

func setOf(tps []TopicPartition) tpSet {
	s := make(tpSet, len(tps))
	for _, tp := range tps {
		s[tp] = struct{}{}
	}
	return s
}

// PartitionState says whether this broker serves the transactional ids of
// a __transaction_state partition.
type PartitionState int8

const (
	// NotOwned: requests get NOT_COORDINATOR.
	NotOwned PartitionState = iota
	// Loading: the partition is being replayed; requests get
	// COORDINATOR_LOAD_IN_PROGRESS.
	Loading
	// Loaded: the partition is served.
	Loaded
)
