package admincli

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The transaction tools of Kafka's kafka-transactions.sh (KIP-664):
// list, describe, find-hanging and abort, through ListTransactions,
// DescribeTransactions, DescribeProducers and WriteTxnMarkers.
func txnActions() []*action {
	return []*action{
		{name: "list", summary: "list transactional ids with their producer id and state (--state, --producer-id filters)", define: defineTxnList},
		{name: "describe", args: "TXN_ID...", summary: "a transactional id's coordinator, state, producer id and epoch, timeout, start and partitions", define: defineTxnDescribe},
		{name: "find-hanging", summary: "open transactions in partitions' producer state older than --max-transaction-timeout that their coordinator does not know (Kafka's hanging transactions)", define: defineTxnFindHanging},
		{name: "abort", summary: "abort the open transaction of --topic/--partition starting at --start-offset (or of --producer-id/--producer-epoch/--coordinator-epoch): writes its ABORT marker", define: defineTxnAbort},
	}
}

type txnListed struct {
	TxnID       string `json:"transactional_id"`
	ProducerID  int64  `json:"producer_id"`
	State       string `json:"state"`
	Coordinator int32  `json:"coordinator"`
}

func defineTxnList(fs *flag.FlagSet) runFunc {
	states := fs.String("state", "", "only these states, comma-separated (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort)")
	pids := fs.String("producer-id", "", "only these producer ids, comma-separated")
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("txn list takes no arguments, got %q", pos)
		}
		var ids []int64
		for _, f := range splitList(*pids) {
			var id int64
			if _, err := fmt.Sscan(f, &id); err != nil {
				return usagef("txn list: --producer-id %q is not a producer id", f)
			}
			ids = append(ids, id)
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		ls, err := e.adm.ListTransactions(ctx, ids, splitList(*states))
		if err != nil {
			return fail("list transactions", err, "")
		}
		out := []txnListed{}
		for _, t := range ls.Sorted() {
			out = append(out, txnListed{t.TxnID, t.ProducerID, t.State, t.Coordinator})
		}
		return e.emit(out, func(w io.Writer) {
			row(w, "TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR")
			for _, t := range out {
				row(w, t.TxnID, t.ProducerID, t.State, t.Coordinator)
			}
		})
	}
}

type txnDescribed struct {
	TxnID         string          `json:"transactional_id"`
	Coordinator   int32           `json:"coordinator"`
	State         string          `json:"state"`
	ProducerID    int64           `json:"producer_id"`
	ProducerEpoch int16           `json:"producer_epoch"`
	TimeoutMs     int32           `json:"timeout_ms"`
	StartMs       int64           `json:"start_ms"` // -1: no transaction open
	Partitions    []topicPartions `json:"partitions"`
	Error         string          `json:"error,omitempty"`
}

func defineTxnDescribe(fs *flag.FlagSet) runFunc {
	return func(e *env, pos []string) error {
		if len(pos) == 0 {
			return usagef("txn describe takes one or more transactional ids")
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		ds, err := e.adm.DescribeTransactions(ctx, pos...)
		if err != nil {
			return fail("describe transactions", err, "")
		}
		out := []txnDescribed{}
		failed := false
		for _, id := range pos {
			d, ok := ds[id]
			td := txnDescribed{TxnID: id, Coordinator: d.Coordinator, State: d.State, ProducerID: d.ProducerID,
				ProducerEpoch: d.ProducerEpoch, TimeoutMs: d.TimeoutMillis, StartMs: d.StartTimestamp, Partitions: []topicPartions{}}
			switch {
			case !ok:
				td.Error = "not in the answer"
			case d.Err != nil:
				td.Error = describeErr(d.Err, "")
			}
			failed = failed || td.Error != ""
			for _, t := range d.Topics.Sorted() {
				td.Partitions = append(td.Partitions, topicPartions{Topic: t.Topic, Partitions: t.Partitions})
			}
			out = append(out, td)
		}
		err = e.emit(out, func(w io.Writer) {
			row(w, "TRANSACTIONAL-ID", "COORDINATOR", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "STARTED", "PARTITIONS")
			for _, t := range out {
				if t.Error != "" {
					row(w, t.TxnID, "-", "error: "+t.Error, "-", "-", "-", "-", "-")
					continue
				}
				started := "-"
				if t.StartMs >= 0 && t.State == "Ongoing" || strings.HasPrefix(t.State, "Prepare") {
					started = time.UnixMilli(t.StartMs).UTC().Format(time.RFC3339)
				}
				var parts []string
				for _, tp := range t.Partitions {
					for _, p := range tp.Partitions {
						parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, p))
					}
				}
				row(w, t.TxnID, t.Coordinator, t.State, t.ProducerID, t.ProducerEpoch, t.TimeoutMs, started, dash(strings.Join(parts, ",")))
			}
		})
		if err == nil && failed {
			return reported{}
		}
		return err
	}
}

// hanging is one open transaction of find-hanging's answer.
type hanging struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	StartOffset      int64  `json:"start_offset"`
	LastTimestampMs  int64  `json:"last_timestamp_ms"`
	Reason           string `json:"reason"`
}

func defineTxnFindHanging(fs *flag.FlagSet) runFunc {
	topics := fs.String("topic", "", "only these topics, comma-separated (default: every topic)")
	maxTimeout := fs.Duration("max-transaction-timeout", 15*time.Minute, "transaction.max.timeout.ms: an open transaction older than this should have been aborted by its coordinator")
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("txn find-hanging takes no arguments, got %q", pos)
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		md, err := e.adm.Metadata(ctx, splitList(*topics)...)
		if err != nil {
			return fail("describe topics", err, "")
		}
		set := kadm.TopicsSet{}
		for _, t := range md.Topics.Sorted() {
			if t.Err != nil {
				return fail("describe topic "+t.Topic, t.Err, "")
			}
			for _, p := range t.Partitions.Sorted() {
				set.Add(t.Topic, p.Partition)
			}
		}
		prods, err := e.adm.DescribeProducers(ctx, set)
		if err != nil {
			return fail("describe producers", err, "")
		}
		now := time.Now()
		var open []kadm.DescribedProducer
		pidSet := map[int64]bool{}
		for _, p := range prods.SortedProducers() {
			if p.CurrentTxnStartOffset < 0 || now.Sub(time.UnixMilli(p.LastTimestamp)) < *maxTimeout {
				continue
			}
			open = append(open, p)
			pidSet[p.ProducerID] = true
		}
		out := []hanging{}
		if len(open) > 0 {
			pids := make([]int64, 0, len(pidSet))
			for id := range pidSet {
				pids = append(pids, id)
			}
			sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
			// What the coordinators know of those producers: an open
			// transaction of the same producer and epoch is not hanging
			// (only slow); anything else is.
			ls, err := e.adm.ListTransactions(ctx, pids, nil)
			if err != nil {
				return fail("list transactions", err, "")
			}
			byPID := map[int64]kadm.ListedTransaction{}
			var ids []string
			for _, t := range ls {
				byPID[t.ProducerID] = t
				ids = append(ids, t.TxnID)
			}
			ds := kadm.DescribedTransactions{}
			if len(ids) > 0 {
				if ds, err = e.adm.DescribeTransactions(ctx, ids...); err != nil {
					return fail("describe transactions", err, "")
				}
			}
			for _, p := range open {
				h := hanging{Topic: p.Topic, Partition: p.Partition, ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
					CoordinatorEpoch: p.CoordinatorEpoch, StartOffset: p.CurrentTxnStartOffset, LastTimestampMs: p.LastTimestamp}
				t, known := byPID[p.ProducerID]
				d := ds[t.TxnID]
				switch {
				case !known:
					h.Reason = "no coordinator knows the producer id"
				case d.ProducerEpoch != p.ProducerEpoch:
					h.Reason = fmt.Sprintf("the coordinator's epoch is %d", d.ProducerEpoch)
				case d.State != "Ongoing" && !strings.HasPrefix(d.State, "Prepare"):
					h.Reason = "the coordinator's transaction is " + d.State
				case !hasPartition(d.Topics, p.Topic, p.Partition):
					h.Reason = "the partition is not in the coordinator's transaction"
				default:
					continue
				}
				out = append(out, h)
			}
		}
		return e.emit(out, func(w io.Writer) {
			if len(out) == 0 {
				fmt.Fprintln(w, "no hanging transactions")
				return
			}
			row(w, "TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "COORDINATOR-EPOCH", "START-OFFSET", "LAST-WRITE", "WHY")
			for _, h := range out {
				row(w, h.Topic, h.Partition, h.ProducerID, h.ProducerEpoch, h.CoordinatorEpoch, h.StartOffset,
					time.UnixMilli(h.LastTimestampMs).UTC().Format(time.RFC3339), h.Reason)
			}
		})
	}
}

type txnAborted struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	Broker        int32  `json:"broker"`
}

func defineTxnAbort(fs *flag.FlagSet) runFunc {
	topic := fs.String("topic", "", "topic of the open transaction (required)")
	partition := fs.Int("partition", -1, "partition of the open transaction (required)")
	start := fs.Int64("start-offset", -1, "first offset of the open transaction (find-hanging shows it): the producer is looked up with DescribeProducers")
	pid := fs.Int64("producer-id", -1, "producer id (instead of --start-offset)")
	epoch := fs.Int("producer-epoch", -1, "producer epoch (with --producer-id)")
	cepoch := fs.Int("coordinator-epoch", -1, "coordinator epoch (with --producer-id)")
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("txn abort takes no arguments, got %q", pos)
		}
		if *topic == "" || *partition < 0 {
			return usagef("txn abort needs --topic and --partition")
		}
		byOffset := *start >= 0
		if byOffset == (*pid >= 0) || !byOffset && (*epoch < 0 || *cepoch < 0) {
			return usagef("txn abort needs --start-offset, or --producer-id with --producer-epoch and --coordinator-epoch")
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		m := kadm.TxnMarkers{ProducerID: *pid, ProducerEpoch: int16(*epoch), CoordinatorEpoch: int32(*cepoch), Topics: kadm.TopicsSet{}}
		m.Topics.Add(*topic, int32(*partition))
		if byOffset {
			set := kadm.TopicsSet{}
			set.Add(*topic, int32(*partition))
			prods, err := e.adm.DescribeProducers(ctx, set)
			if err != nil {
				return fail("describe producers", err, "")
			}
			found := false
			prods.EachPartition(func(p kadm.DescribedProducersPartition) {
				if p.Err != nil {
					err = p.Err
				}
			})
			if err != nil {
				return fail(fmt.Sprintf("describe producers of %s-%d", *topic, *partition), err, "")
			}
			prods.EachProducer(func(p kadm.DescribedProducer) {
				if p.CurrentTxnStartOffset == *start {
					m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, found = p.ProducerID, p.ProducerEpoch, p.CoordinatorEpoch, true
				}
			})
			if !found {
				return fail("abort", fmt.Errorf("no producer of %s-%d has an open transaction starting at offset %d", *topic, *partition, *start), "")
			}
		}
		rs, err := e.adm.WriteTxnMarkers(ctx, m)
		if err != nil {
			return fail("write the abort marker", err, "")
		}
		var out txnAborted
		rs.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
			if p.Err != nil && err == nil {
				err = p.Err
			}
			out = txnAborted{p.Topic, p.Partition, p.ProducerID, m.ProducerEpoch, p.NodeID}
		})
		if err != nil {
			return fail(fmt.Sprintf("abort the transaction of producer %d on %s-%d", m.ProducerID, *topic, *partition), err, "")
		}
		return e.emit(out, func(w io.Writer) {
			fmt.Fprintf(w, "aborted the transaction of producer %d (epoch %d) on %s-%d (leader %d)\n", out.ProducerID, out.ProducerEpoch, out.Topic, out.Partition, out.Broker)
		})
	}
}

func hasPartition(s kadm.TopicsSet, t string, p int32) bool {
	_, ok := s[t][p]
	return ok
}

// splitList is a comma-separated flag's values, blanks dropped.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
