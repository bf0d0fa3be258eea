package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// etlWorker is one consume-transform-produce member of group etl: it
// copies what it reads from "in" to "out" in transactions whose offsets
// commit with them (kgo.GroupTransactSession), until stop is closed.
// Fetch and produce errors are logged (the session aborts the transaction
// of a failed produce); a failed Begin, or an End failed with a broker's
// error, is the worker's error. An End that failed in the client (a dial
// to a crashed coordinator past the retry timeout: the outcome unknown)
// starts a new session with the same transactional id, as an application
// would: its InitProducerId fences the old one and finishes its
// transaction, and the group's committed offsets say where to resume.
func etlWorker(ctx context.Context, seeds []string, groupID, id string, stop <-chan struct{}, stats *etlStats, logf func(string, ...any)) error {
	for {
		err := etlSession(ctx, seeds, groupID, id, stop, stats, logf)
		var ke *kerr.Error
		if err == nil || ctx.Err() != nil || !errors.Is(err, errEtlEnd) || errors.As(err, &ke) {
			return err
		}
		logf("etl %s: a new session after %v", id, err)
	}
}

var errEtlEnd = errors.New("end")

func etlSession(ctx context.Context, seeds []string, groupID, id string, stop <-chan struct{}, stats *etlStats, logf func(string, ...any)) error {
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(seeds...),
		kgo.TransactionalID(groupID+"-"+id),
		kgo.ConsumerGroup(groupID),
		kgo.ConsumeTopics("in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second),
		kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.TransactionTimeout(10*time.Second),
		kgo.RetryTimeout(testWait),
		kgo.ClientID("etl-"+id),
	)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := s.PollRecords(pctx, 50)
		cancel()
		if fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				logf("etl %s fetch: %v", id, err)
			}
		})
		if fs.NumRecords() == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			return fmt.Errorf("etl %s begin: %w", id, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			s.Produce(ctx, &kgo.Record{Topic: "out", Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					logf("etl %s produce: %v", id, err)
				}
			})
		})
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			return fmt.Errorf("etl %s %w: %w", id, errEtlEnd, err)
		}
		if committed {
			stats.commits.Add(1)
		} else {
			stats.aborts.Add(1)
		}
	}
}

// etlStats counts the transactions of the workers.
type etlStats struct{ commits, aborts atomic.Int64 }

// readCommitted reads "out" from the start up to its read_committed end
// and returns how many times each value was seen.
func readCommitted(t *testing.T, n *Node) (map[string]int, int) {
	t.Helper()
	adm := newAdmin(t, n)
	ends, err := adm.ListCommittedOffsets(testCtx(t), "out")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	// Control records kept: the last offset below the end is the last
	// transaction's marker, so positions reach the ends exactly.
	cl := newClient(t, n, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords())
	seen := map[string]int{}
	total := 0
	pos := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if pos[p] < end {
				return false
			}
		}
		return true
	}
	ctx := testCtx(t)
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read of out: positions %v, ends %v", pos, want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			seen[string(r.Value)]++
			total++
		})
	}
	return seen, total
}

// TestGroupTransactSessionExactlyOnce: franz-go's consume-transform-produce
// (kgo.GroupTransactSession) copies N records from "in" to "out" exactly
// once while the group rebalances twice mid-stream (a member joins, a
// member leaves): every value is in "out" once for read_committed, none
// missing, none twice.
func TestGroupTransactSessionExactlyOnce(t *testing.T) {
	n := startNode(t, t.TempDir(), withSettings(map[string]string{
		"transaction.state.log.num.partitions":     "3",
		"transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr":            "1",
	}))
	adm := newAdmin(t, n)
	createTopic(t, adm, "in", 4, nil)
	createTopic(t, adm, "out", 4, nil)
	const N = 6000
	prod := newClient(t, n, kgo.DefaultProduceTopic("in"))
	for i := 0; i < N; i++ {
		prod.Produce(testCtx(t), &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := prod.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var stats etlStats
	errs := make(chan error, 3)
	start := func(id string) chan struct{} {
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := etlWorker(ctx, []string{n.Addr()}, "etl", id, stop, &stats, t.Logf); err != nil {
				errs <- err
			}
		}()
		return stop
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	outCount := func() int64 {
		ends, err := adm.ListCommittedOffsets(ctx, "out")
		if err != nil {
			return 0
		}
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		return sum
	}
	stopA := start("a")
	testutil.Eventually(t, 60*time.Second, func() bool { return outCount() > N/4 }, "a quarter of the records copied")
	stopB := start("b")
	testutil.Eventually(t, 60*time.Second, func() bool { return outCount() > N/2 }, "half of the records copied")
	close(stopA)
	// The committed end of "out" counts markers too: wait until the
	// group's committed offsets cover all of "in".
	testutil.Eventually(t, 60*time.Second, func() error {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		os, err := adm.FetchOffsets(ctx, "etl")
		if err != nil {
			return err
		}
		var sum int64
		os.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum < N {
			return fmt.Errorf("group committed %d of %d", sum, N)
		}
		return nil
	}, "the group to commit all of in")
	close(stopB)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("transactions: %d committed, %d aborted", stats.commits.Load(), stats.aborts.Load())
	seen, total := readCommitted(t, n)
	if total != N || len(seen) != N {
		var twice []string
		for v, c := range seen {
			if c > 1 && len(twice) < 10 {
				twice = append(twice, v)
			}
		}
		t.Fatalf("read_committed out: %d records, %d distinct, want %d each once (some twice: %v)", total, len(seen), N, twice)
	}
}

// TestTxnOffsetCommitAbortThenCommitEndToEnd drives the KIP-447 path
// request by request against the real transaction coordinator and marker
// path: offsets committed in a transaction stay invisible (UNSTABLE with
// RequireStable) until EndTxn's marker, an abort drops them, a commit
// makes them the group's, and a restart keeps exactly that. Without
// AddOffsetsToTxn the offsets partition is not in the transaction:
// INVALID_TXN_STATE.
func TestTxnOffsetCommitAbortThenCommitEndToEnd(t *testing.T) {
	dir := t.TempDir()
	settings := withSettings(map[string]string{
		"transaction.state.log.num.partitions":     "3",
		"transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr":            "1",
	})
	n := startNode(t, dir, settings)
	createTopic(t, newAdmin(t, n), "t", 1, nil)
	cl := newClient(t, n)
	ctx := testCtx(t)

	var pid int64
	var epoch int16
	testutil.Eventually(t, testWait, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("x"), 30000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return nil
	}, "InitProducerId")

	c := dialRaw(t, n)
	findCoordinator(t, c, "g")
	waitLoaded(t, n, "g")
	commit := func(off int64) int16 {
		return txnOffsetCommitRaw(t, c, txnCommit{version: 3, txnID: "x", group: "g", pid: pid, epoch: epoch,
			generation: -1, topic: "t", offset: off})
	}
	if code := commit(3); code != kerr.InvalidTxnState.Code {
		t.Fatalf("TxnOffsetCommit before AddOffsetsToTxn: %d, want INVALID_TXN_STATE", code)
	}
	addOffsets := func() {
		t.Helper()
		testutil.Eventually(t, testWait, func() error {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "x", pid, epoch, "g"
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.ErrorCode) // CONCURRENT_TRANSACTIONS: retried
		}, "AddOffsetsToTxn")
	}
	endTxn := func(commit bool) {
		t.Helper()
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "x", pid, epoch, commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("EndTxn(%v): %v %d", commit, err, resp.ErrorCode)
		}
	}
	waitOffset := func(c *rawConn, want int64) {
		t.Helper()
		testutil.Eventually(t, testWait, func() error {
			off, code := fetchStable(t, c, 8, "g", "t", 0, true)
			if code != 0 || off != want {
				return fmt.Errorf("offset %d code %d", off, code)
			}
			return nil
		}, "the group's offset to be %d", want)
	}

	addOffsets()
	if code := commit(5); code != 0 {
		t.Fatalf("TxnOffsetCommit: %d", code)
	}
	if off, code := fetchStable(t, c, 8, "g", "t", 0, true); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("pending offset: %d code %d, want UNSTABLE_OFFSET_COMMIT", off, code)
	}
	endTxn(false)
	waitOffset(c, -1) // aborted: never visible

	addOffsets()
	if code := commit(7); code != 0 {
		t.Fatalf("TxnOffsetCommit: %d", code)
	}
	endTxn(true)
	waitOffset(c, 7)

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2 := startNode(t, dir, settings)
	c2 := dialRaw(t, n2)
	waitLoaded(t, n2, "g")
	waitOffset(c2, 7)
}

// TestTxnOffsetsSurviveGroupCoordinatorCrash: kill -9 (a power loss:
// unsynced bytes lost) of the broker coordinating a group while a
// transaction's offsets are pending there, __consumer_offsets at RF=3.
// The new leader of the group's partition replays them as pending
// (UNSTABLE_OFFSET_COMMIT, never visible early), and the transaction's
// COMMIT marker, written to it, makes them the group's offsets.
func TestTxnOffsetsSurviveGroupCoordinatorCrash(t *testing.T) {
	settings := map[string]string{
		"offsets.commit.timeout.ms":                "5000",
		"transaction.state.log.num.partitions":     "3",
		"transaction.state.log.replication.factor": "3",
		"transaction.state.log.min.isr":            "2",
	}
	for k, v := range replicatedGroupSettings {
		if _, ok := settings[k]; !ok {
			settings[k] = v
		}
	}
	c := startMemCluster(t, 3, settings, 2, 3)
	c.createTopicRF("data", 1, 3)
	g, idx, leaderID := groupOnFollowerLed(t, c)
	waitLoaded(t, c.node(leaderID), g)
	cl := c.client()
	ctx := testCtx(t)

	var pid int64
	var epoch int16
	retry := func(what string, fn func() (int16, error)) {
		t.Helper()
		testutil.Eventually(t, 2*testWait, func() error {
			code, err := fn()
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(code)
		}, "%s", what)
	}
	retry("InitProducerId", func() (int16, error) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = kmsg.StringPtr("crash-x"), 60000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		pid, epoch = resp.ProducerID, resp.ProducerEpoch
		return resp.ErrorCode, nil
	})
	retry("AddOffsetsToTxn", func() (int16, error) {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = "crash-x", pid, epoch, g
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
	retry("TxnOffsetCommit", func() (int16, error) {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.SetVersion(3)
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "crash-x", g, pid, epoch, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "data"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, 77, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		return resp.Topics[0].Partitions[0].ErrorCode, nil
	})
	fetch := func() (int64, int16, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.SetVersion(8)
		req.RequireStable = true
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rgt := kmsg.NewOffsetFetchRequestGroupTopic()
		rgt.Topic, rgt.Partitions = "data", []int32{0}
		rg.Topics = append(rg.Topics, rgt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return -1, 0, err
		}
		if code := resp.Groups[0].ErrorCode; code != 0 {
			return -1, code, nil
		}
		p := resp.Groups[0].Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode, nil
	}
	if off, code, err := fetch(); err != nil || code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("before the crash: offset %d code %d err %v, want UNSTABLE_OFFSET_COMMIT", off, code, err)
	}

	c.crash(leaderID, 0, rand.New(rand.NewPCG(1, 2)))
	c.waitNewLeader(offsetsTopic, idx, leaderID)
	// The new coordinator replays the offsets as pending.
	testutil.Eventually(t, 2*testWait, func() error {
		off, code, err := fetch()
		if err != nil {
			return err
		}
		if code == 0 {
			t.Fatalf("after the crash, before the marker: offset %d visible", off)
		}
		if code != kerr.UnstableOffsetCommit.Code {
			return kerr.ErrorForCode(code)
		}
		return nil
	}, "the new coordinator to answer UNSTABLE_OFFSET_COMMIT")

	retry("EndTxn", func() (int16, error) {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "crash-x", pid, epoch, true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return 0, err
		}
		return resp.ErrorCode, nil
	})
	testutil.Eventually(t, 3*testWait, func() error {
		off, code, err := fetch()
		if err != nil {
			return err
		}
		if code != 0 || off != 77 {
			return fmt.Errorf("offset %d code %d", off, code)
		}
		return nil
	}, "the committed transaction's offset on the new coordinator")
}

// TestPythonSendOffsetsToTransactionExactlyOnce: librdkafka's
// consume-transform-produce (python3-confluent-kafka,
// send_offsets_to_transaction: AddOffsetsToTxn, then TxnOffsetCommit
// with the member's generation) through the group side: an aborted
// transaction's offsets are never the group's (a new member starts over
// from the beginning), the committed ones are, and "out" holds every
// value exactly once for read_committed.
func TestPythonSendOffsetsToTransactionExactlyOnce(t *testing.T) {
	n := startNode(t, t.TempDir(), withSettings(map[string]string{
		"transaction.state.log.num.partitions":     "3",
		"transaction.state.log.replication.factor": "1",
		"transaction.state.log.min.isr":            "1",
	}))
	adm := newAdmin(t, n)
	createTopic(t, adm, "in", 2, nil)
	createTopic(t, adm, "out", 2, nil)
	const N = 500
	prod := newClient(t, n, kgo.DefaultProduceTopic("in"))
	for i := 0; i < N; i++ {
		prod.Produce(testCtx(t), &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := prod.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	out := pyClient(t, nil, "etl", n.Addr(), "py-etl", "py-txn", "in", "out", strconv.Itoa(N))
	var res struct{ Committed, Aborted int }
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		t.Fatalf("client.py etl: %q: %v", out, err)
	}
	if res.Committed != N || res.Aborted != 1 {
		t.Fatalf("client.py etl: %+v, want %d committed after 1 abort", res, N)
	}
	offs, err := adm.FetchOffsets(testCtx(t), "py-etl")
	if err != nil || offs.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, offs.Error())
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != N {
		t.Fatalf("the group committed %d offsets in all, want %d", sum, N)
	}
	seen, total := readCommitted(t, n)
	if total != N || len(seen) != N {
		t.Fatalf("read_committed out: %d records, %d distinct, want %d each once", total, len(seen), N)
	}
}

// TestGroupTransactSessionSurvivesCoordinatorCrash: consume-transform-
// produce on three brokers at RF=3 while the group's coordinator dies
// (kill -9: its unsynced bytes lost) mid-stream and stays down: the new
// coordinator replays the pending transactional offsets, the workers go
// on, and "out" holds every value exactly once for read_committed.
func TestGroupTransactSessionSurvivesCoordinatorCrash(t *testing.T) {
	settings := map[string]string{
		"offsets.commit.timeout.ms":                "5000",
		"transaction.state.log.num.partitions":     "3",
		"transaction.state.log.replication.factor": "3",
		"transaction.state.log.min.isr":            "2",
		"min.insync.replicas":                      "2",
	}
	for k, v := range replicatedGroupSettings {
		if _, ok := settings[k]; !ok {
			settings[k] = v
		}
	}
	c := startMemCluster(t, 3, settings, 2, 3)
	c.createTopicRF("in", 3, 3)
	c.createTopicRF("out", 3, 3)
	g, idx, leaderID := groupOnFollowerLed(t, c)
	const N = 10000
	prod := c.client(kgo.DefaultProduceTopic("in"))
	for i := 0; i < N; i++ {
		prod.Produce(testCtx(t), &kgo.Record{Value: []byte(strconv.Itoa(i))}, nil)
	}
	if err := prod.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var stats etlStats
	errs := make(chan error, 2)
	stop := make(chan struct{})
	for _, id := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := etlWorker(ctx, c.seeds(), g, id, stop, &stats, t.Logf); err != nil {
				errs <- err
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	// A new client each time: franz-go keeps a group's coordinator until
	// it answers NOT_COORDINATOR, and a dead one answers nothing.
	committed := func() (int64, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RetryTimeout(5*time.Second))
		if err != nil {
			return 0, err
		}
		defer cl.Close()
		os, err := kadm.NewClient(cl).FetchOffsets(ctx, g)
		if err != nil {
			return 0, err
		}
		var sum int64
		os.Each(func(o kadm.OffsetResponse) { sum += max(o.At, 0) })
		return sum, nil
	}
	var before int64
	testutil.Eventually(t, 60*time.Second, func() bool { before, _ = committed(); return before > N/10 }, "a tenth of in committed")
	c.crash(leaderID, 0, rand.New(rand.NewPCG(3, 4)))
	t.Logf("broker %d (coordinator of %s) crashed with %d of %d committed, %d transactions", leaderID, g, before, N, stats.commits.Load())
	c.waitNewLeader(offsetsTopic, idx, leaderID)
	// It stays down: a restarted node listens on a new port, which
	// franz-go's clients keep dialing at the old one for a while.
	testutil.Eventually(t, 90*time.Second, func() error {
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		n, err := committed()
		if err != nil {
			return err
		}
		if n < N {
			return fmt.Errorf("group committed %d of %d", n, N)
		}
		return nil
	}, "the group to commit all of in after the crash")
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("transactions: %d committed, %d aborted", stats.commits.Load(), stats.aborts.Load())
	seen, total := readCommitted(t, c.node(1))
	if total != N || len(seen) != N {
		t.Fatalf("read_committed out: %d records, %d distinct, want %d each once", total, len(seen), N)
	}
}
