package txncoord

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Describe answers DescribeTransactions (key 65, KIP-664) for ids: per id
// INVALID_REQUEST for an empty id, NOT_COORDINATOR /
// COORDINATOR_LOAD_IN_PROGRESS when its partition is not served here,
// TRANSACTIONAL_ID_NOT_FOUND when unknown or expiring (tombstone pending),
// else its producer, epoch, state name, timeout, start time and partitions.
// Authorization (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) is the broker's.
func (c *Coordinator) Describe(ids []string) []kmsg.DescribeTransactionsResponseTransactionState {
	out := make([]kmsg.DescribeTransactionsResponseTransactionState, 0, len(ids))
	for _, id := range ids {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID = id
		s.ProducerID, s.ProducerEpoch, s.StartTimestamp = -1, -1, -1
		_, m, code := c.lookup(id)
		switch {
		case id == "":
			s.ErrorCode = kerr.InvalidRequest.Code
		case code != 0:
			s.ErrorCode = code
		case m == nil || m.pending == Dead:
			s.ErrorCode = kerr.TransactionalIDNotFound.Code
		default:
			s.State = m.state.String()
			s.TimeoutMillis = m.timeoutMs
			s.StartTimestamp = m.startMs
			s.ProducerID, s.ProducerEpoch = m.producerID, m.epoch
			parts := m.partitions
			if m.remaining != nil {
				parts = m.remaining // Kafka removes each partition as its marker is acked
			}
			for _, tp := range parts.sorted() {
				if n := len(s.Topics); n == 0 || s.Topics[n-1].Topic != tp.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = tp.Topic
					s.Topics = append(s.Topics, t)
				}
				t := &s.Topics[len(s.Topics)-1]
				t.Partitions = append(t.Partitions, tp.Partition)
			}
		}
		out = append(out, s)
	}
	return out
}

// ListFilter is a ListTransactions request's filters: state names
// (unknown names are echoed back in UnknownStateFilters), producer ids,
// and (v1) DurationMs, the minimum time since a transaction started (-1:
// none).
type ListFilter struct {
	States      []string
	ProducerIDs []int64
	DurationMs  int64
}

// List answers ListTransactions (key 66, KIP-664, v0–1) over the partitions
// this broker serves: COORDINATOR_LOAD_IN_PROGRESS while any of them
// loads, else the ids passing every filter (never those expiring), sorted
// by transactional id.
func (c *Coordinator) List(now int64, f ListFilter) *kmsg.ListTransactionsResponse {
	resp := kmsg.NewPtrListTransactionsResponse()
	for _, pt := range c.parts {
		if pt.state == Loading {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			return resp
		}
	}
	var states []State
	for _, name := range f.States {
		st, err := kmsg.ParseTransactionState(name)
		if err != nil || st.String() != name { // Kafka matches names exactly
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		states = append(states, st)
	}
	if len(f.States) > 0 && len(states) == 0 {
		return resp // only unknown states asked for: nothing matches (as in Kafka)
	}
	c.loadedTxns(func(_ *partition, m *txnMeta) {
		switch {
		case m.pending == Dead || m.state == Dead:
		case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.producerID):
		case len(states) > 0 && !slices.Contains(states, m.state):
		case f.DurationMs >= 0 && now-m.startMs <= f.DurationMs:
		default:
			s := kmsg.NewListTransactionsResponseTransactionState()
			s.TransactionalID, s.ProducerID, s.TransactionState = m.id, m.producerID, m.state.String()
			resp.TransactionStates = append(resp.TransactionStates, s)
		}
	})
	slices.SortFunc(resp.TransactionStates, func(a, b kmsg.ListTransactionsResponseTransactionState) int {
		return strings.Compare(a.TransactionalID, b.TransactionalID)
	})
	return resp
}
