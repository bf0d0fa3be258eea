package broker

// The transaction coordinator's node wiring (issue 16): the internal topic
// __transaction_state, the load of its partitions this broker leads, the
// appends of the coordinator's records, the timers, and the handlers'
// entry point. Every decision is broker/txncoord's (a deterministic
// planner); this file is the shell: one mutex around the
// txncoord.Coordinator, goroutines for appends and loads, and the marker
// sender (txn_marker_sender.go).
//
// Partition lifecycle, driven by reconcile through txnPartitionChanged:
//
//	NotOwned --leader at epoch e--> Loading(e) --HW at the epoch start, replayed to the HW--> Loaded(e)
//	    ^                              |                                                      |
//	    +------ not leader / dropped (load cancelled, Unload: waiters NOT_COORDINATOR) -------+
//
// A new leader epoch while leading reloads (the coordinator epoch is the
// partition's leader epoch; markers carry it). While Loading, requests get
// COORDINATOR_LOAD_IN_PROGRESS; NotOwned gives NOT_COORDINATOR.
//
// Appends go through the partition's leader append path
// (partition.appendRecords) as acks=all: NOT_ENOUGH_REPLICAS while the
// ISR is below min ISR, then a wait for the high watermark to cover the
// record; only then AppendDone(code 0). The record is appended only if
// the partition is still led at the coordinator epoch the planner asked
// for, so a record of an older epoch never lands after a reload. A
// retried append (CompleteX after COORDINATOR_NOT_AVAILABLE) waits
// txnAppendRetryBackoff first.
//
// How long an EndTxn waits: when an ISR member of __transaction_state
// dies, its PrepareX is durable once the controller fences it,
// broker.session.timeout.ms after its last heartbeat (7.9 s measured with
// the defaults), or, when it also led the controller quorum, that long
// after the new quorum leader's election (10.1–10.5 s). The second is past
// franz-go's read deadline for a request without a timeout field (10 s):
// the answer is lost, and the client's retry gets CONCURRENT_TRANSACTIONS
// (as from Kafka) until CompleteX, which needs every marker written.
// cmd/strata's TestKill9TxnDataBrokerAndQuorumLeaderDuringCommit.
//
// Differences from Kafka: the replication factor is capped at the live
// brokers when the topic is created (Kafka refuses to create it with
// fewer brokers than transaction.state.log.replication.factor); the
// transactional id → partition map uses transaction.state.log.num.partitions
// from the config, not the topic's partition count (they differ only if
// the config changed after the topic was created); a load replays up to
// the high watermark; no ACLs.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/broker/txncoord"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
)

// txnStateTopic is Kafka's internal topic of transaction metadata.
const txnStateTopic = "__transaction_state"

// txnAppendTimeout bounds the wait for the ISR to take a
// __transaction_state record (Kafka's request.timeout.ms, which its
// TransactionStateManager appends with); REQUEST_TIMED_OUT after it.
const txnAppendTimeout = 30 * time.Second

// txnLoad is one partition's load: the coordinator epoch it loads at.
type txnLoad struct {
	epoch  int32
	cancel context.CancelFunc
}

// txnCoordinator is the node's transaction coordinator shell. Its methods
// are safe for concurrent use.
type txnCoordinator struct {
	n *Node

	mu      sync.Mutex // guards c, nextReq, waiters, loads
	c       *txncoord.Coordinator
	nextReq txncoord.ReqID
	waiters map[txncoord.ReqID]chan txncoord.Answer
	loads   map[int32]txnLoad // partitions led here (loading or loaded), by index

	markers *markerSender
	clients txnClients // verify-only AddPartitionsToTxn to other coordinators (txn_verify.go)

	// writes counts the appends tried (tests: a retry backs off).
	writes atomic.Int64
	// loadHook, if set (tests), runs at the start of each partition load,
	// before any read: a slow load is a hook that blocks.
	loadHook atomic.Pointer[func(partition int32)]
}

func newTxnCoordinator(n *Node) *txnCoordinator {
	tc := &txnCoordinator{n: n, waiters: map[txncoord.ReqID]chan txncoord.Answer{}, loads: map[int32]txnLoad{}}
	tc.c = txncoord.New(txncoord.Config{
		Partitions:        n.cfg.TxnStatePartitions,
		OffsetsPartitions: n.cfg.OffsetsTopicPartitions,
		MaxTimeoutMs:      int32(n.cfg.TxnMaxTimeout / time.Millisecond),
		IDExpirationMs:    n.cfg.TxnIDExpiration.Milliseconds(),
	}, n.pids.allocate)
	tc.markers = newMarkerSender(tc)
	return tc
}

func nowMs() int64 { return time.Now().UnixMilli() }

// close stops the loads and the marker sender.
func (tc *txnCoordinator) close() {
	tc.mu.Lock()
	for p, l := range tc.loads {
		l.cancel()
		delete(tc.loads, p)
	}
	tc.mu.Unlock()
	tc.markers.close()
	tc.closeClients()
}

// txnAppendRetryBackoff is how long an append the planner retries (a
// CompleteX after COORDINATOR_NOT_AVAILABLE: the ISR is below min ISR)
// waits first.
const txnAppendRetryBackoff = 100 * time.Millisecond

// runLocked carries out the planner's Effects: answers to their waiters,
// appends in goroutines (each acknowledged with AppendDone), markers to
// the sender (after markerDelay: a retry backs off), notes to the log.
// tc.mu must be held.
func (tc *txnCoordinator) runLocked(e txncoord.Effects, markerDelay time.Duration) {
	tc.runAfter(e, markerDelay, 0)
}

// runAfter is runLocked with appends started after appendDelay (a retry).
// Once the node is closing, no append starts: its partition is being
// given up, and the next load reads what became durable.
func (tc *txnCoordinator) runAfter(e txncoord.Effects, markerDelay, appendDelay time.Duration) {
	for _, a := range e.Answers {
		if ch, ok := tc.waiters[a.Req]; ok {
			delete(tc.waiters, a.Req)
			ch <- a
		}
	}
	for _, a := range e.Appends {
		if tc.n.ctx.Err() != nil {
			break
		}
		tc.n.loops.Add(1)
		go func() {
			defer tc.n.loops.Done()
			if appendDelay > 0 {
				t := time.NewTimer(appendDelay)
				select {
				case <-tc.n.ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			code := tc.write(a)
			if tc.n.ctx.Err() != nil {
				return
			}
			tc.mu.Lock()
			tc.runAfter(tc.c.AppendDone(nowMs(), a.Token, code), 0, txnAppendRetryBackoff)
			tc.mu.Unlock()
		}()
	}
	for _, m := range e.Markers {
		tc.markers.enqueue(m, markerDelay)
	}
	for _, note := range e.Notes {
		tc.n.logger.Info("broker: transaction coordinator: " + note)
	}
}

// do plans one client request (plan gets its ReqID) and waits for its
// answer, which may come at once or after an append.
func (tc *txnCoordinator) do(ctx context.Context, plan func(req txncoord.ReqID) txncoord.Effects) txncoord.Answer {
	ch := make(chan txncoord.Answer, 1)
	tc.mu.Lock()
	tc.nextReq++
	req := tc.nextReq
	tc.waiters[req] = ch
	tc.runLocked(plan(req), 0)
	tc.mu.Unlock()
	select {
	case a := <-ch:
		return a
	case <-ctx.Done():
		tc.mu.Lock()
		delete(tc.waiters, req)
		tc.mu.Unlock()
		select {
		case a := <-ch:
			return a
		default:
		}
		return txncoord.Answer{Req: req, Err: kerr.CoordinatorNotAvailable.Code, ProducerID: -1, Epoch: -1}
	}
}

// locked runs fn on the coordinator under its mutex.
func (tc *txnCoordinator) locked(fn func(c *txncoord.Coordinator)) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	fn(tc.c)
}

// write appends one planner record to its __transaction_state partition
// as acks=all, as its leader at the coordinator epoch, and returns the
// produce error code (0 once the ISR has it).
func (tc *txnCoordinator) write(a txncoord.Append) int16 {
	n := tc.n
	tc.writes.Add(1)
	p := n.partition(txnStateTopic, a.Partition)
	if p == nil || !p.leader.Load() || p.leaderEpoch.Load() != a.CoordinatorEpoch {
		return kerr.NotLeaderForPartition.Code
	}
	if err := p.acksAllCheck(); err != nil {
		return errCode(err)
	}
	now := nowMs()
	b := group.BuildBatch([]group.KV{{Key: a.Key, Value: a.Value}}, now)
	res, err := p.appendRecords(b, a.CoordinatorEpoch, now, nil)
	if err != nil {
		if errors.Is(err, storage.ErrLogFailed) || errors.Is(err, storage.ErrClosed) {
			return kerr.KafkaStorageError.Code
		}
		return errCode(err)
	}
	ctx, cancel := context.WithTimeout(n.ctx, txnAppendTimeout)
	defer cancel()
	switch err := p.waitHWInEpoch(ctx, res.lastOffset, a.CoordinatorEpoch); {
	case err == nil:
		if err := p.acksAllResult(); err != nil {
			return errCode(err)
		}
		return 0
	case errors.Is(err, context.DeadlineExceeded) && n.ctx.Err() == nil:
		return kerr.RequestTimedOut.Code
	case n.ctx.Err() != nil:
		return kerr.NotLeaderForPartition.Code
	default:
		if c := errCode(err); c != 0 && c != kerr.UnknownServerError.Code {
			return c
		}
		return kerr.NotLeaderForPartition.Code
	}
}

// txnPartitionChanged is called by reconcile for each hosted
// __transaction_state partition after its leadership is set (p nil: the
// partition was dropped). Becoming leader (or a new leader epoch) starts a
// load at that epoch; losing it cancels a load and unloads.
func (tc *txnCoordinator) txnPartitionChanged(index int32, p *partition) {
	lead := p != nil && p.leader.Load()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	cur, had := tc.loads[index]
	if !lead {
		if had {
			cur.cancel()
			delete(tc.loads, index)
			tc.runLocked(tc.c.Unload(index), 0)
			tc.n.logger.Info("broker: unloaded transaction coordinator partition", "partition", index)
		}
		return
	}
	epoch := p.leaderEpoch.Load()
	if had && cur.epoch == epoch {
		return
	}
	if had {
		cur.cancel()
	}
	ctx, cancel := context.WithCancel(tc.n.ctx)
	tc.loads[index] = txnLoad{epoch: epoch, cancel: cancel}
	tc.runLocked(tc.c.BeginLoad(index, epoch), 0)
	tc.n.loops.Add(1)
	go func() {
		defer tc.n.loops.Done()
		tc.load(ctx, index, epoch, p)
	}()
}

// load replays the partition's records and serves it (unless the load
// was cancelled or superseded meanwhile). A failed read retries after a
// second, the partition staying Loading; a corrupt record leaves it
// Loading (txncoord's rule) with an error logged.
func (tc *txnCoordinator) load(ctx context.Context, index, epoch int32, p *partition) {
	if h := tc.loadHook.Load(); h != nil {
		(*h)(index)
	}
	for {
		start := time.Now()
		recs, err := tc.replay(ctx, p)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			tc.mu.Lock()
			if ctx.Err() != nil || tc.loads[index].epoch != epoch {
				tc.mu.Unlock()
				return
			}
			eff, lerr := tc.c.Load(nowMs(), index, epoch, recs)
			tc.runLocked(eff, 0)
			tc.mu.Unlock()
			if lerr != nil {
				tc.n.logger.Error("broker: load transaction coordinator partition", "partition", index, "err", lerr)
				return
			}
			tc.n.logger.Info("broker: loaded transaction coordinator partition", "partition", index,
				"epoch", epoch, "records", len(recs), "took", time.Since(start))
			return
		}
		tc.n.logger.Warn("broker: load transaction coordinator partition, retrying", "partition", index, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// replay reads p's records from its start to its high watermark (after
// waiting for the HW to reach the start of this leader epoch, as the
// group coordinator's load does: everything below it was acknowledged by
// an earlier leader).
func (tc *txnCoordinator) replay(ctx context.Context, p *partition) ([]txncoord.Record, error) {
	var recs []txncoord.Record
	err := p.replayBatches(ctx, func(one []byte) error {
		h, err := batch.ParseHeader(one)
		if err != nil {
			return err
		}
		if h.Control() {
			return nil
		}
		return batch.Records(one, func(r batch.Record) error {
			if r.KeyNull {
				return nil
			}
			rec := txncoord.Record{Key: append([]byte(nil), r.Key...)}
			if !r.ValueNull {
				rec.Value = append([]byte{}, r.Value...)
			}
			recs = append(recs, rec)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// run drives the timers: the timeout abort every
// transaction.abort.timed.out.transaction.cleanup.interval.ms, the expiry
// of idle ids every transaction.remove.expired.transaction.cleanup.interval.ms.
func (tc *txnCoordinator) run(ctx context.Context) {
	abort := time.NewTicker(tc.n.cfg.TxnAbortTimedOutInterval)
	defer abort.Stop()
	expire := time.NewTicker(tc.n.cfg.TxnRemoveExpiredInterval)
	defer expire.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-abort.C:
			tc.mu.Lock()
			tc.runLocked(tc.c.AbortTimedOut(nowMs()), 0)
			tc.mu.Unlock()
		case <-expire.C:
			tc.mu.Lock()
			tc.runLocked(tc.c.ExpireIDs(nowMs()), 0)
			tc.mu.Unlock()
		}
	}
}

// numPartitions is the partition count of __transaction_state in the
// metadata view, 0 while it does not exist.
func (tc *txnCoordinator) numPartitions() int32 {
	var cnt int32
	tc.n.view(func(st *metadata.State) {
		if t, ok := st.TopicByName(txnStateTopic); ok {
			cnt = int32(len(st.Partitions(t.ID)))
		}
	})
	return cnt
}

// ensureTopic creates __transaction_state unless it exists, as Kafka does
// on the first FindCoordinator of a transactional id:
// transaction.state.log.num.partitions,
// transaction.state.log.replication.factor capped at the live brokers (as
// offsets.topic.replication.factor is here; Kafka refuses to create it
// instead, and clients retry until enough brokers are up),
// min.insync.replicas=transaction.state.log.min.isr capped at that
// replication factor, cleanup.policy=compact,
// segment.bytes=transaction.state.log.segment.bytes,
// compression.type=uncompressed. It waits (up to ctx) for the partitions
// to be led.
func (tc *txnCoordinator) ensureTopic(ctx context.Context) error {
	if tc.numPartitions() > 0 {
		return nil
	}
	n := tc.n
	rf := n.cfg.TxnStateReplicationFactor
	live := 0
	n.view(func(st *metadata.State) {
		for _, b := range st.Brokers() {
			if !b.Fenced {
				live++
			}
		}
	})
	if live > 0 && int(rf) > live {
		rf = int16(live)
	}
	minISR := min(n.cfg.TxnStateMinISR, rf)
	release, err := n.reservePartitions(n.onThisNode(int64(n.cfg.TxnStatePartitions), rf, nil))
	if err != nil {
		return err
	}
	defer release()
	res, err := n.svc.CreateTopics(ctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{
		Name: txnStateTopic, NumPartitions: n.cfg.TxnStatePartitions, ReplicationFactor: rf,
		Configs: map[string]string{
			metadata.ConfigCleanupPolicy:     "compact",
			metadata.ConfigSegmentBytes:      fmt.Sprint(n.cfg.TxnStateSegmentBytes),
			metadata.ConfigMinInsyncReplicas: fmt.Sprint(minISR),
			metadata.ConfigCompressionType:   "uncompressed",
		},
	}}})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return r.Err
		}
	}
	if !n.waitTopics(ctx, []string{txnStateTopic}) {
		return ctx.Err()
	}
	return nil
}

// findTxnCoordinator answers one transactional id of FindCoordinator: the
// leader of its __transaction_state partition.
func (n *Node) findTxnCoordinator(key, listener string) coordinatorAnswer {
	a := coordinatorAnswer{node: -1, port: -1, err: kerr.CoordinatorNotAvailable}
	if key == "" {
		a.err = kerr.InvalidRequest
		return a
	}
	n.view(func(st *metadata.State) {
		t, ok := st.TopicByName(txnStateTopic)
		if !ok || len(st.Partitions(t.ID)) == 0 {
			return
		}
		if p, ok := st.Partition(t.ID, txncoord.PartitionFor(key, n.cfg.TxnStatePartitions)); ok {
			a = n.coordinatorOn(st, p, listener, a)
		}
	})
	return a
}
