package broker

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/txncoord"
)

// txnProps are the settings of the coordinator tests: few
// __transaction_state partitions, so the loads are quick.
var txnProps = map[string]string{"transaction.state.log.num.partitions": "3"}

func txnProducer(t testing.TB, seeds []string, id string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RetryTimeout(testWait), kgo.TransactionalID(id),
		kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// describeTxn returns id's DescribeTransactions state, polling until want
// (if not "") or the deadline.
func waitTxnState(t testing.TB, adm *kadm.Client, id, want string) kadm.DescribedTransaction {
	t.Helper()
	deadline := time.Now().Add(testWait)
	var last kadm.DescribedTransaction
	var lastErr error
	for {
		ds, err := adm.DescribeTransactions(testCtx(t), id)
		lastErr = err
		if err == nil {
			if d, ok := ds[id]; ok {
				last = d
				if d.Err == nil && (want == "" || d.State == want) {
					return d
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s: state %q (err %v / %v), want %q", id, last.State, last.Err, lastErr, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTxnCoordinatorCommitAbortOneNode(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 2, nil)
	cl := txnProducer(t, []string{n.Addr()}, "tx-1")
	ctx := testCtx(t)

	for i, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < 2; p++ {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		d := waitTxnState(t, adm, "tx-1", "Ongoing")
		if len(d.Topics["t"]) != 2 || d.TimeoutMillis <= 0 || d.ProducerID < 0 {
			t.Fatalf("ongoing: %+v", d)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %d: %v", i, err)
		}
		want := "CompleteCommit"
		if !commit {
			want = "CompleteAbort"
		}
		waitTxnState(t, adm, "tx-1", want)
	}
	// ListTransactions sees it; the topic is internal and compacted.
	lt, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil || len(lt.TransactionalIDs()) != 1 || lt.TransactionalIDs()[0] != "tx-1" {
		t.Fatalf("list: %v %v", lt, err)
	}
	md, err := adm.Metadata(ctx, txnStateTopic)
	if err != nil || !md.Topics[txnStateTopic].IsInternal || len(md.Topics[txnStateTopic].Partitions) != 3 {
		t.Fatalf("metadata of %s: %+v %v", txnStateTopic, md.Topics[txnStateTopic], err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, txnStateTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range [][2]string{{"cleanup.policy", "compact"}, {"min.insync.replicas", "1"}, {"segment.bytes", "104857600"}} {
		c, err := rc.On(txnStateTopic, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, kv := range c.Configs {
			if kv.Key == want[0] {
				found = true
				if kv.MaybeValue() != want[1] {
					t.Errorf("%s = %q, want %q", want[0], kv.MaybeValue(), want[1])
				}
			}
		}
		if !found {
			t.Errorf("%s missing", want[0])
		}
	}
}

// txnRetry repeats a raw request while the coordinator answers a
// retriable loading/concurrency code.
func txnRetry[R kmsg.Response](t testing.TB, c *rawConn, req kmsg.Request, code func(R) int16) R {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for {
		r := c.roundTrip(req).(R)
		switch code(r) {
		case kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
			if time.Now().After(deadline) {
				t.Fatalf("still %v", kerr.ErrorForCode(code(r)))
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		return r
	}
}

func addPartsReq(version int16, id string, pid int64, epoch int16, tps ...txnTP) *kmsg.AddPartitionsToTxnRequest {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(version)
	req.TransactionalID, req.ProducerID, req.ProducerEpoch = id, pid, epoch
	for _, tp := range tps {
		rt := kmsg.NewAddPartitionsToTxnRequestTopic()
		rt.Topic, rt.Partitions = tp.topic, []int32{tp.part}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

type txnTP struct {
	topic string
	part  int32
}

func addCodes(r *kmsg.AddPartitionsToTxnResponse) map[txnTP]int16 {
	out := map[txnTP]int16{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out[txnTP{t.Topic, p.Partition}] = p.ErrorCode
		}
	}
	for _, tx := range r.Transactions {
		for _, t := range tx.Topics {
			for _, p := range t.Partitions {
				out[txnTP{t.Topic, p.Partition}] = p.ErrorCode
			}
		}
	}
	return out
}

func firstAddCode(r *kmsg.AddPartitionsToTxnResponse) int16 {
	for _, c := range addCodes(r) {
		if c != 0 {
			return c
		}
	}
	return 0
}

// TestTxnCoordinatorRawProtocol drives the coordinator's APIs by hand:
// FindCoordinator type 1 (single and batched), InitProducerId bumps and
// the fence of an ongoing transaction, AddPartitionsToTxn's errors (old
// epoch by version, unknown partitions), the KIP-890 verify-only check
// over the wire and in-process, EndTxn's state check and version cap,
// ListTransactions' filters.
func TestTxnCoordinatorRawProtocol(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps)
	createTopic(t, newAdmin(t, n), "t", 2, nil)
	c := dialRaw(t, n)

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{"a", ""}
	fr := txnRetry(t, c, fc, func(r *kmsg.FindCoordinatorResponse) int16 { return r.Coordinators[0].ErrorCode })
	if fr.Coordinators[0].NodeID != 1 || fr.Coordinators[1].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("find coordinator: %+v", fr.Coordinators)
	}

	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("a"), 60000
	initCode := func(r *kmsg.InitProducerIDResponse) int16 { return r.ErrorCode }
	first := txnRetry(t, c, init, initCode)
	second := txnRetry(t, c, init, initCode)
	if first.ErrorCode != 0 || second.ErrorCode != 0 || second.ProducerID != first.ProducerID || first.ProducerEpoch != 0 || second.ProducerEpoch != 1 {
		t.Fatalf("init: %+v then %+v", first, second)
	}
	pid := first.ProducerID
	init.TransactionTimeoutMillis = 900_001 // above transaction.max.timeout.ms
	if r := c.roundTrip(init).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.InvalidTransactionTimeout.Code {
		t.Fatalf("init with a too long timeout: %+v", r)
	}
	init.TransactionTimeoutMillis = 60000

	addCode := firstAddCode
	// The fenced epoch: PRODUCER_FENCED from v2 (KIP-588), before it INVALID_PRODUCER_EPOCH.
	for v, want := range map[int16]int16{1: kerr.InvalidProducerEpoch.Code, 3: kerr.ProducerFenced.Code} {
		if r := c.roundTrip(addPartsReq(v, "a", pid, 0, txnTP{"t", 0})).(*kmsg.AddPartitionsToTxnResponse); addCode(r) != want {
			t.Fatalf("v%d add with the old epoch: %v", v, addCodes(r))
		}
	}
	r := c.roundTrip(addPartsReq(3, "a", pid, 1, txnTP{"t", 0}, txnTP{"nope", 0})).(*kmsg.AddPartitionsToTxnResponse)
	if got := addCodes(r); got[txnTP{"t", 0}] != kerr.OperationNotAttempted.Code || got[txnTP{"nope", 0}] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("add with an unknown partition: %v", got)
	}
	if r := txnRetry(t, c, addPartsReq(3, "a", pid, 1, txnTP{"t", 0}), addCode); addCode(r) != 0 {
		t.Fatalf("add: %v", addCodes(r))
	}

	// Verify-only (v4+, a partition leader's question) over the wire.
	vreq := kmsg.NewPtrAddPartitionsToTxnRequest()
	vreq.SetVersion(4)
	vt := kmsg.NewAddPartitionsToTxnRequestTransaction()
	vt.TransactionalID, vt.ProducerID, vt.ProducerEpoch, vt.VerifyOnly = "a", pid, 1, true
	vtt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
	vtt.Topic, vtt.Partitions = "t", []int32{0, 1}
	vt.Topics = append(vt.Topics, vtt)
	vreq.Transactions = append(vreq.Transactions, vt)
	// TRANSACTION_ABORTABLE is v5's; v4 gets INVALID_TXN_STATE.
	for v, notIn := range map[int16]int16{4: kerr.InvalidTxnState.Code, 5: kerr.TransactionAbortable.Code} {
		vreq.SetVersion(v)
		vr := c.roundTrip(vreq).(*kmsg.AddPartitionsToTxnResponse)
		if got := addCodes(vr); len(vr.Transactions) != 1 || vr.Transactions[0].TransactionalID != "a" ||
			got[txnTP{"t", 0}] != 0 || got[txnTP{"t", 1}] != notIn {
			t.Fatalf("v%d verify only: %+v", v, vr)
		}
	}
	// ... and in-process (the coordinator is local).
	ctx := testCtx(t)
	codes := n.verifyTxnPartitions(ctx, "a", pid, 1, map[string][]int32{"t": {0, 1}})
	if codes["t"][0] != 0 || codes["t"][1] != kerr.TransactionAbortable.Code {
		t.Fatalf("verifyTxnPartitions: %v", codes)
	}
	if codes := n.verifyTxnPartitions(ctx, "a", pid, 0, map[string][]int32{"t": {0}}); codes["t"][0] != kerr.ProducerFenced.Code {
		t.Fatalf("verifyTxnPartitions, old epoch: %v", codes)
	}
	if codes := n.verifyTxnPartitions(ctx, "unknown", pid, 1, map[string][]int32{"t": {0}}); codes["t"][0] != kerr.InvalidProducerIDMapping.Code {
		t.Fatalf("verifyTxnPartitions, unknown id: %v", codes)
	}

	// An InitProducerId while Ongoing fences (epoch 2) and aborts; the
	// retry, once the abort completed, bumps again.
	if r := c.roundTrip(init).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("init while ongoing: %+v", r)
	}
	third := txnRetry(t, c, init, initCode)
	if third.ErrorCode != 0 || third.ProducerID != pid || third.ProducerEpoch != 3 {
		t.Fatalf("init after the fence: %+v", third)
	}

	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(3)
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "a", pid, 3, true
	if r := c.roundTrip(end).(*kmsg.EndTxnResponse); r.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("end with no transaction: %+v", r)
	}

	lt := kmsg.NewPtrListTransactionsRequest()
	lt.SetVersion(1)
	lt.StateFilters, lt.DurationFilterMillis = []string{"Empty", "Bogus"}, -1
	lr := c.roundTrip(lt).(*kmsg.ListTransactionsResponse)
	if lr.ErrorCode != 0 || len(lr.TransactionStates) != 1 || lr.TransactionStates[0].TransactionalID != "a" ||
		lr.TransactionStates[0].TransactionState != "Empty" || len(lr.UnknownStateFilters) != 1 || lr.UnknownStateFilters[0] != "Bogus" {
		t.Fatalf("list: %+v", lr)
	}

	// EndTxn v5 (transaction version 2) is not served.
	end.SetVersion(5)
	c.send(end)
	c.expectClosed()
}

func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// TestTxnCoordinatorFencesOldProducer: a second producer with the same
// transactional id fences the first (its ongoing transaction is aborted,
// the epoch bumped): the first one's commit fails PRODUCER_FENCED, the
// second one commits.
func TestTxnCoordinatorFencesOldProducer(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	ctx := testCtx(t)
	old := txnProducer(t, []string{n.Addr()}, "fenced")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("old")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d0 := waitTxnState(t, adm, "fenced", "Ongoing")

	cur := txnProducer(t, []string{n.Addr()}, "fenced")
	if err := cur.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cur.ProduceSync(ctx, &kgo.Record{Value: []byte("new")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d1 := waitTxnState(t, adm, "fenced", "Ongoing")
	if d1.ProducerID != d0.ProducerID || d1.ProducerEpoch <= d0.ProducerEpoch {
		t.Fatalf("the second producer: %+v, the first %+v", d1, d0)
	}
	// The abort marker of the fence carried the new epoch: the partition
	// refuses the old instance's batches too.
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); !isFenced(err) {
		t.Fatalf("the fenced producer's produce: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed")
	}
	if err := cur.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	waitTxnState(t, adm, "fenced", "CompleteCommit")
	if got := readTxnTopic(t, []string{n.Addr()}, "t", 1, true, 1); len(got) != 1 || !got["new"] { // "old" is before "new" in the log
		t.Fatalf("read_committed after the fence: %v, want only the new producer's record", got)
	}
}

// TestTxnCoordinatorAbortsTimedOutTransaction: a transaction open past its
// transaction.timeout.ms is aborted by the coordinator's scan, its epoch
// bumped, so the producer's late commit is fenced.
func TestTxnCoordinatorAbortsTimedOutTransaction(t *testing.T) {
	props := map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "50"}
	for k, v := range txnProps {
		props[k] = v
	}
	n := startNode(t, t.TempDir(), props)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	ctx := testCtx(t)
	cl := txnProducer(t, []string{n.Addr()}, "slow", kgo.TransactionTimeout(300*time.Millisecond))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d0 := waitTxnState(t, adm, "slow", "")
	d1 := waitTxnState(t, adm, "slow", "CompleteAbort")
	if d1.ProducerID != d0.ProducerID || d1.ProducerEpoch != d0.ProducerEpoch+1 {
		t.Fatalf("after the timeout abort: %+v (before %+v)", d1, d0)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); !isFenced(err) {
		t.Fatalf("commit after the timeout: %v, want PRODUCER_FENCED", err)
	}
}

// TestTxnMarkersSkipDeletedTopic: a partition whose topic was deleted
// during the transaction gets no marker (Kafka skips partitions without a
// leader endpoint), and the commit completes.
func TestTxnMarkersSkipDeletedTopic(t *testing.T) {
	n := startNode(t, t.TempDir(), txnProps)
	var log markerLog
	log.install(n)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	createTopic(t, adm, "gone", 1, nil)
	ctx := testCtx(t)
	cl := txnProducer(t, []string{n.Addr()}, "del")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"t", "gone"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitTxnState(t, adm, "del", "Ongoing")
	if _, err := adm.DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testWait)
	for n.partition("gone", 0) != nil {
		if time.Now().After(deadline) {
			t.Fatal("gone-0 still hosted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitTxnState(t, adm, "del", "CompleteCommit")
	for _, m := range log.markers() {
		for _, tp := range m.Topics {
			if tp.Topic != "t" {
				t.Fatalf("marker sent to %s", tp.Topic)
			}
		}
	}
	if len(log.markers()) != 1 {
		t.Fatalf("markers %+v, want one for t", log.markers())
	}
}

// TestTxnCoordinatorStateSurvivesRestartAndExpires: the coordinator's
// state is replayed from __transaction_state at the next start (the
// producer id and epoch are kept: the next InitProducerId bumps the
// epoch), and an id idle past transactional.id.expiration.ms is removed
// by the sweep (TRANSACTIONAL_ID_NOT_FOUND).
func TestTxnCoordinatorStateSurvivesRestartAndExpires(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, txnProps)
	adm := newAdmin(t, n)
	createTopic(t, adm, "t", 1, nil)
	ctx := testCtx(t)
	cl := txnProducer(t, []string{n.Addr()}, "keep")
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	before := waitTxnState(t, adm, "keep", "CompleteCommit")
	cl.Close()
	n.Close()

	props := map[string]string{
		"transactional.id.expiration.ms":                             "1000",
		"transaction.remove.expired.transaction.cleanup.interval.ms": "50",
	}
	for k, v := range txnProps {
		props[k] = v
	}
	n = startNode(t, dir, props)
	adm = newAdmin(t, n)
	after := waitTxnState(t, adm, "keep", "CompleteCommit")
	if after.ProducerID != before.ProducerID || after.ProducerEpoch != before.ProducerEpoch {
		t.Fatalf("after the restart: %+v, before %+v", after, before)
	}
	c := dialRaw(t, n)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("keep"), 60000
	r := txnRetry(t, c, init, func(r *kmsg.InitProducerIDResponse) int16 { return r.ErrorCode })
	if r.ErrorCode != 0 || r.ProducerID != before.ProducerID || r.ProducerEpoch != before.ProducerEpoch+1 {
		t.Fatalf("init after the restart: %+v, before %+v", r, before)
	}
	// Idle for transactional.id.expiration.ms: removed.
	deadline := time.Now().Add(testWait)
	for {
		ds, err := adm.DescribeTransactions(ctx, "keep")
		if err == nil && errors.Is(ds["keep"].Err, kerr.TransactionalIDNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keep not expired: %+v %v", ds, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTxnCoordinatorLoadInProgress: while its __transaction_state
// partition loads, a transactional id's requests get
// COORDINATOR_LOAD_IN_PROGRESS (InitProducerId, DescribeTransactions,
// ListTransactions); once loaded they are served.
func TestTxnCoordinatorLoadInProgress(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"transaction.state.log.num.partitions": "1"})
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	hook := func(int32) { <-release }
	n.txns.loadHook.Store(&hook)
	c := dialRaw(t, n)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorType, fc.CoordinatorKey = 1, "l"
	txnRetry(t, c, fc, func(r *kmsg.FindCoordinatorResponse) int16 { return r.ErrorCode })
	// The partition is led; its load blocks in the hook.
	deadline := time.Now().Add(testWait)
	for {
		var st txncoord.PartitionState
		n.txns.locked(func(c *txncoord.Coordinator) { st, _ = c.PartitionState(0) })
		if st == txncoord.Loading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition 0: %v, want Loading", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("l"), 60000
	if r := c.roundTrip(init).(*kmsg.InitProducerIDResponse); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("init while loading: %+v", r)
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"l"}
	if r := c.roundTrip(dt).(*kmsg.DescribeTransactionsResponse); r.TransactionStates[0].ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("describe while loading: %+v", r)
	}
	if r := c.roundTrip(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse); r.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list while loading: %+v", r)
	}
	unblock()
	if r := txnRetry(t, c, init, func(r *kmsg.InitProducerIDResponse) int16 { return r.ErrorCode }); r.ErrorCode != 0 {
		t.Fatalf("init once loaded: %+v", r)
	}
}
