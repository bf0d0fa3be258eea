package broker

// The share coordinator's node wiring (issue 19, KIP-932): the internal
// topic __share_group_state, the load of the partitions this broker
// leads, and the share-state operations the RPCs InitializeShareGroupState
// (83), ReadShareGroupState (84), WriteShareGroupState (85),
// DeleteShareGroupState (86) and ReadShareGroupStateSummary (87) serve,
// in process for the RPC persister (share_persister.go) when this broker
// is the coordinator. Every decision on the records is broker/share's
// Journal (a deterministic core); this file is the shell: a mutex per
// state partition, appends, loads.
//
// Partition lifecycle, driven by reconcile through sharePartitionChanged:
//
//	NotOwned --leader at epoch e--> Loading(e) --HW at the log end, replayed--> Loaded(e)
//	    ^                              |                                        |
//	    +------ not leader / dropped (load cancelled, journal dropped) ---------+
//
// A new leader epoch while leading reloads. While Loading, requests get
// COORDINATOR_LOAD_IN_PROGRESS; NotOwned gives NOT_COORDINATOR.
//
// A load first waits for the high watermark to reach the log end offset:
// everything in a leader's log is either committed eventually or
// truncated away only after the leadership moved, so once the HW covers
// the log end, the replay sees every record that was ever acknowledged
// and none that can vanish. The same rule makes a write whose fate is
// unknown (the ISR did not take it within share.coordinator.write.timeout.ms)
// safe: the partition reloads, so the journal follows the log, never a
// guess.
//
// Writes: one operation at a time per state partition (its mutex is held
// from the journal's decision through the append until the HW covers the
// record, acks=all as the group coordinator's commits), so the journal and
// the log never diverge: a write refused before it reached the log is
// reverted in the journal; one that may be in the log reloads the
// partition. The RPC answers only once its record is committed: an
// acknowledged write survives the loss of the leader.
//
// Differences from Kafka: no batching of writes of one partition into one
// append (Kafka's coordinator runtime lingers share.coordinator.append.linger.ms);
// the replication factor is capped at the live brokers when the topic is
// created (as __transaction_state here); no cold-partition snapshots
// (Kafka rewrites idle share-partitions' snapshots so that time retention
// does not take them; here the topic has no retention: retention.ms and
// retention.bytes -1); the partition for a key uses the topic's partition
// count, the config's only before the topic exists.
//
// Pruning, as Kafka: the topic is cleanup.policy=delete, never compact —
// a share-partition's ShareUpdate records are deltas under one key, so
// compaction, which keeps a key's last record, would keep the last delta
// and lose the others. Every share.coordinator.state.topic.prune.interval.ms
// each loaded partition's log start moves up to its journal's
// LastRedundantOffset (the lowest offset of a live key's current
// snapshot), bounded by the HW; followers follow the log start as they do
// DeleteRecords'. A snapshot is written every
// share.coordinator.snapshot.update.records.per.snapshot updates, which
// bounds both a replay and what pruning must keep. A topic an earlier
// version created compacted is altered to delete at the first prune.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/broker/share"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/batch"
)

// shareStateTopic is Kafka's internal topic of share-group state.
const shareStateTopic = "__share_group_state"

// shareStatePart is one __share_group_state partition led here.
type shareStatePart struct {
	mu     sync.Mutex // serialises the partition's operations (decision, append, commit)
	index  int32
	epoch  int32 // the leader epoch it is loaded at
	loaded bool
	j      *share.Journal
	p      *partition
	cancel context.CancelFunc
}

// shareCoordinator is the node's share coordinator shell. Its methods are
// safe for concurrent use.
type shareCoordinator struct {
	n *Node

	mu    sync.Mutex // guards parts
	parts map[int32]*shareStatePart

	clients interBrokerClients // to remote coordinators (share_persister.go)

	// loadHook, if set (tests), runs at the start of each partition load.
	loadHook atomic.Pointer[func(partition int32)]
	// appendHook, if set (tests), runs before each append; an error fails
	// it before anything reaches the log.
	appendHook atomic.Pointer[func(partition int32) error]
	// loads counts completed loads (tests), pruneRounds prune passes.
	loads, pruneRounds atomic.Int64
}

func newShareCoordinator(n *Node) *shareCoordinator {
	return &shareCoordinator{n: n, parts: map[int32]*shareStatePart{}}
}

// close stops the loads and the clients.
func (sc *shareCoordinator) close() {
	sc.mu.Lock()
	for i, sp := range sc.parts {
		sp.cancel()
		delete(sc.parts, i)
	}
	sc.mu.Unlock()
	sc.clients.closeAll()
}

// sharePartitionFor is Kafka's ShareCoordinatorService.partitionFor:
// abs(String.hashCode("group:topicId:partition")) % partitions, where the
// topic id is printed as Kafka's Uuid.toString (URL-safe base64, no
// padding) and hashCode is Java's over the UTF-16 code units.
func sharePartitionFor(k share.Key, partitions int32) int32 {
	return javaAbsHash(shareCoordinatorKey(k)) % partitions
}

// shareCoordinatorKey is SharePartitionKey.asCoordinatorKey, the
// FindCoordinator key of key type SHARE.
func shareCoordinatorKey(k share.Key) string {
	return fmt.Sprintf("%s:%s:%d", k.Group, base64.RawURLEncoding.EncodeToString(k.TopicID[:]), k.Partition)
}

// parseShareCoordinatorKey is SharePartitionKey.validate and getInstance
// of Kafka 4.2: parsed from the right, so a group id may hold ':' — the
// partition after the last ':', the topic id (Kafka's Uuid form) before
// it, a non-empty group id before that; a non-negative partition.
func parseShareCoordinatorKey(s string) (share.Key, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return share.Key{}, false
	}
	j := strings.LastIndexByte(s[:i], ':')
	if j <= 0 {
		return share.Key{}, false
	}
	parts := []string{s[:j], s[j+1 : i], s[i+1:]}
	id, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || len(id) != 16 {
		return share.Key{}, false
	}
	p, err := strconv.ParseInt(parts[2], 10, 32)
	if err != nil || p < 0 {
		return share.Key{}, false
	}
	k := share.Key{Group: parts[0], Partition: int32(p)}
	copy(k.TopicID[:], id)
	return k, true
}

// javaAbsHash is Kafka's Utils.abs(s.hashCode()): Math.abs, with
// Integer.MIN_VALUE mapped to 0 (not a mask of the sign bit).
func javaAbsHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 { // a surrogate pair in UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	switch {
	case h == math.MinInt32:
		return 0
	case h < 0:
		return -h
	}
	return h
}

// numPartitions is the partition count of __share_group_state in the
// metadata view, 0 while it does not exist.
func (sc *shareCoordinator) numPartitions() int32 {
	var cnt int32
	sc.n.view(func(st *metadata.State) {
		if t, ok := st.TopicByName(shareStateTopic); ok {
			cnt = int32(len(st.Partitions(t.ID)))
		}
	})
	return cnt
}

// partitionOf is k's __share_group_state partition (COORDINATOR_NOT_AVAILABLE
// while the topic does not exist).
func (sc *shareCoordinator) partitionOf(k share.Key) (int32, error) {
	cnt := sc.numPartitions()
	if cnt == 0 {
		return -1, kerr.CoordinatorNotAvailable
	}
	return sharePartitionFor(k, cnt), nil
}

// ensureTopic creates __share_group_state unless it exists, as Kafka does
// on the first FindCoordinator of a share key:
// share.coordinator.state.topic.num.partitions, its replication factor
// capped at the live brokers, min.insync.replicas capped at that,
// cleanup.policy=compact, segment.bytes, compression.type=uncompressed. It
// waits (up to ctx) for the partitions to be led.
func (sc *shareCoordinator) ensureTopic(ctx context.Context) error {
	if sc.numPartitions() > 0 {
		return nil
	}
	n := sc.n
	rf := n.cfg.ShareStateReplicationFactor
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
	minISR := min(n.cfg.ShareStateMinISR, rf)
	release, err := n.reservePartitions(n.onThisNode(int64(n.cfg.ShareStatePartitions), rf, nil))
	if err != nil {
		return err
	}
	defer release()
	configs := shareStateTopicConfigs()
	configs[metadata.ConfigSegmentBytes] = fmt.Sprint(n.cfg.ShareStateSegmentBytes)
	configs[metadata.ConfigMinInsyncReplicas] = fmt.Sprint(minISR)
	configs[metadata.ConfigCompressionType] = "uncompressed"
	res, err := n.svc.CreateTopics(ctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{
		Name: shareStateTopic, NumPartitions: n.cfg.ShareStatePartitions, ReplicationFactor: rf,
		Configs: configs,
	}}})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return r.Err
		}
	}
	if !n.waitTopics(ctx, []string{shareStateTopic}) {
		return ctx.Err()
	}
	return nil
}

// sharePartitionChanged is called by reconcile for each hosted
// __share_group_state partition after its leadership is set (p nil: the
// partition was dropped).
func (sc *shareCoordinator) sharePartitionChanged(index int32, p *partition) {
	lead := p != nil && p.leader.Load()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	cur := sc.parts[index]
	if !lead {
		if cur != nil {
			cur.cancel()
			delete(sc.parts, index)
			sc.n.logger.Info("broker: unloaded share coordinator partition", "partition", index)
		}
		return
	}
	epoch := p.leaderEpoch.Load()
	if cur != nil && cur.epoch == epoch && cur.p == p {
		return
	}
	if cur != nil {
		cur.cancel()
	}
	sc.startLoadLocked(index, epoch, p)
}

// startLoadLocked replaces partition index's state with a new Loading one
// and starts its load. sc.mu must be held.
func (sc *shareCoordinator) startLoadLocked(index, epoch int32, p *partition) {
	ctx, cancel := context.WithCancel(sc.n.ctx)
	sp := &shareStatePart{index: index, epoch: epoch, p: p, cancel: cancel}
	sc.parts[index] = sp
	if sc.n.ctx.Err() != nil { // closing: no new goroutine
		return
	}
	sc.n.loops.Add(1)
	go func() {
		defer sc.n.loops.Done()
		sc.load(ctx, sp)
	}()
}

// reload restarts sp's load if sp is still the partition's current state
// (a write whose fate is unknown).
func (sc *shareCoordinator) reload(sp *shareStatePart) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.parts[sp.index] != sp {
		return
	}
	sp.cancel()
	sc.startLoadLocked(sp.index, sp.epoch, sp.p)
}

// load replays the partition into a journal and serves it; a failed read
// retries after a second (Loading meanwhile), a record that does not
// decode leaves it Loading with an error logged.
func (sc *shareCoordinator) load(ctx context.Context, sp *shareStatePart) {
	if h := sc.loadHook.Load(); h != nil {
		(*h)(sp.index)
	}
	for {
		start := time.Now()
		j, recs, err := sc.replay(ctx, sp.p)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			keys := j.Keys() // before j is shared
			sp.mu.Lock()
			if ctx.Err() == nil {
				sp.j, sp.loaded = j, true
			}
			sp.mu.Unlock()
			sc.loads.Add(1)
			sc.n.logger.Info("broker: loaded share coordinator partition", "partition", sp.index,
				"epoch", sp.epoch, "records", recs, "share-partitions", keys, "took", time.Since(start))
			return
		}
		if errors.Is(err, share.ErrBadRecord) {
			sc.n.logger.Error("broker: load share coordinator partition", "partition", sp.index, "err", err)
			return
		}
		sc.n.logger.Warn("broker: load share coordinator partition, retrying", "partition", sp.index, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// replay waits for the HW to cover p's log end (see the file comment),
// then rebuilds the journal from the log's records.
func (sc *shareCoordinator) replay(ctx context.Context, p *partition) (*share.Journal, int, error) {
	if end := p.log.LogEndOffset(); end > 0 {
		if err := p.waitHW(ctx, end-1); err != nil {
			return nil, 0, err
		}
	}
	var kvs []share.LogRecord
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
			lr := share.LogRecord{Offset: h.BaseOffset + int64(r.OffsetDelta), Key: append([]byte(nil), r.Key...)}
			if !r.ValueNull {
				lr.Value = append([]byte{}, r.Value...)
			}
			kvs = append(kvs, lr)
			return nil
		})
	})
	if err != nil {
		return nil, 0, err
	}
	j, err := share.Replay(kvs)
	if err != nil {
		return nil, 0, err
	}
	j.UpdatesPerSnapshot = sc.n.cfg.ShareUpdatesPerSnapshot
	if j.UpdatesPerSnapshot == 0 {
		j.UpdatesPerSnapshot = -1 // 0 configured: every write a snapshot
	}
	return j, len(kvs), nil
}

// shareOp is one operation on a loaded partition's journal: it returns the
// records to append (none: nothing to write) or the operation's error.
type shareOp func(j *share.Journal, nowMs int64) ([]share.Record, error)

// do runs op on k's partition: NOT_COORDINATOR unless it is led here,
// COORDINATOR_LOAD_IN_PROGRESS while it loads; the records op returns are
// appended as acks=all before do returns nil.
func (sc *shareCoordinator) do(ctx context.Context, k share.Key, op shareOp) error {
	index, err := sc.partitionOf(k)
	if err != nil {
		return err
	}
	sc.mu.Lock()
	sp := sc.parts[index]
	sc.mu.Unlock()
	if sp == nil {
		return kerr.NotCoordinator
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.loaded {
		return kerr.CoordinatorLoadInProgress
	}
	saved := sp.j.Save(k)
	recs, err := op(sp.j, nowMs())
	if err != nil || len(recs) == 0 {
		return err
	}
	first, logged, err := sc.append(ctx, sp, recs)
	if err == nil {
		sp.j.Placed(recs, first)
		return nil
	}
	if logged {
		// The record may still commit: the journal must follow the log.
		sp.loaded = false
		sc.reload(sp) // lock order: a partition's mu, then sc.mu
		return err
	}
	// Nothing reached the log: undo the journal's step.
	sp.j.Revert(saved)
	return err
}

// append writes recs to sp's partition as one batch, acks=all, at sp's
// leader epoch, and returns the offset of its first record. logged
// reports whether the batch may be in the log (the error came after the
// local append).
func (sc *shareCoordinator) append(ctx context.Context, sp *shareStatePart, recs []share.Record) (first int64, logged bool, err error) {
	if h := sc.appendHook.Load(); h != nil {
		if err := (*h)(sp.index); err != nil {
			return -1, false, err
		}
	}
	p := sp.p
	if !p.leader.Load() || p.leaderEpoch.Load() != sp.epoch {
		return -1, false, kerr.NotCoordinator
	}
	// Kafka's coordinator runtime answers NOT_ENOUGH_REPLICAS(_AFTER_APPEND)
	// and REQUEST_TIMED_OUT as COORDINATOR_NOT_AVAILABLE, a lost leadership
	// or a failed log as NOT_COORDINATOR.
	if err := p.acksAllCheck(); err != nil {
		return -1, false, kerr.CoordinatorNotAvailable
	}
	kvs := make([]group.KV, len(recs))
	for i, r := range recs {
		kvs[i].Key, kvs[i].Value = share.EncodeRecord(r)
	}
	now := nowMs()
	res, err := p.appendRecords(group.BuildBatch(kvs, now), sp.epoch, now, nil)
	if err != nil {
		// A failed or closed log (storage.ErrLogFailed, ErrClosed) or
		// anything else the append refused: nothing reached the log.
		sc.n.logger.Warn("broker: share state append refused", "partition", sp.index, "err", err)
		return -1, false, kerr.NotCoordinator
	}
	first = res.lastOffset - int64(len(recs)) + 1
	wctx, cancel := context.WithTimeout(ctx, sc.n.cfg.ShareWriteTimeout)
	defer cancel()
	switch err := p.waitHWInEpoch(wctx, res.lastOffset, sp.epoch); {
	case err == nil:
		if err := p.acksAllResult(); err != nil {
			return first, true, kerr.CoordinatorNotAvailable
		}
		return first, false, nil
	case errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
		return first, true, kerr.CoordinatorNotAvailable
	default:
		return first, true, kerr.NotCoordinator
	}
}

// prune moves the log start of every __share_group_state partition loaded
// here up to its journal's last redundant offset (capped at the high
// watermark), as Kafka's coordinator does every
// share.coordinator.state.topic.prune.interval.ms with DeleteRecords: the
// topic's cleanup.policy is delete with no retention, so this is what
// bounds it. A partition still on cleanup.policy=compact (created so by
// an earlier version: compaction keeps a share-partition's last
// ShareUpdate only, and the updates are deltas) is set to delete first.
func (sc *shareCoordinator) prune(ctx context.Context) {
	sc.mu.Lock()
	parts := make([]*shareStatePart, 0, len(sc.parts))
	for _, sp := range sc.parts {
		parts = append(parts, sp)
	}
	sc.mu.Unlock()
	migrate := false
	for _, sp := range parts {
		p := sp.p
		if strings.Contains(p.log.Config().CleanupPolicy, "compact") {
			migrate = true
		}
		sp.mu.Lock()
		if !sp.loaded || !p.leader.Load() || p.leaderEpoch.Load() != sp.epoch {
			sp.mu.Unlock()
			continue
		}
		off, ok := sp.j.LastRedundantOffset()
		off = min(off, p.hw.Load())
		before := p.log.LogStartOffset()
		if ok && off > before {
			if err := p.log.SetLogStartOffset(off); err != nil {
				sc.n.logger.Warn("broker: prune share coordinator partition", "partition", sp.index, "to", off, "err", err)
			} else {
				sc.n.logger.Debug("broker: pruned share coordinator partition", "partition", sp.index, "from", before, "to", off)
			}
		}
		sp.mu.Unlock()
	}
	if migrate {
		sc.migrateCleanupPolicy(ctx)
	}
	sc.pruneRounds.Add(1)
}

// shareStateTopicConfigs are the configs __share_group_state is created
// with (and an older compacted one is altered to): KIP-932's
// cleanup.policy=delete, with no time or size retention, since only
// pruning may remove state.
func shareStateTopicConfigs() map[string]string {
	return map[string]string{
		metadata.ConfigCleanupPolicy:  "delete",
		metadata.ConfigRetentionMs:    "-1",
		metadata.ConfigRetentionBytes: "-1",
	}
}

// migrateCleanupPolicy sets __share_group_state's cleanup.policy to
// delete (and retention off) where an earlier version created it
// compacted.
func (sc *shareCoordinator) migrateCleanupPolicy(ctx context.Context) {
	var entries []metadata.AlterConfigEntry
	for k, v := range shareStateTopicConfigs() {
		entries = append(entries, metadata.AlterConfigEntry{Name: k, Value: &v, Op: metadata.OpSet})
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(0))
	defer cancel()
	res, err := sc.n.svc.AlterConfigs(cctx, metadata.AlterConfigsRequest{Incremental: true, Resources: []metadata.AlterConfigResource{{
		Type: metadata.ResourceTopic, Name: shareStateTopic, Configs: entries,
	}}})
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if err != nil {
		sc.n.logger.Warn("broker: set cleanup.policy=delete on "+shareStateTopic, "err", err)
		return
	}
	sc.n.logger.Info("broker: " + shareStateTopic + " was compacted (its ShareUpdate records are deltas, which compaction loses): cleanup.policy set to delete, pruned by the share coordinator")
}

// run prunes every share.coordinator.state.topic.prune.interval.ms until
// ctx ends.
func (sc *shareCoordinator) run(ctx context.Context) {
	every(ctx, sc.n.cfg.SharePruneInterval, func() { sc.prune(ctx) })
}

// topicPartitionKnown reports whether the metadata has topic id's
// partition (UNKNOWN_TOPIC_OR_PARTITION otherwise, as Kafka's shard checks
// its metadata image).
func (sc *shareCoordinator) topicPartitionKnown(k share.Key) bool {
	ok := false
	sc.n.view(func(st *metadata.State) {
		if k.Partition >= 0 {
			_, ok = st.Partition(uuid.UUID(k.TopicID), k.Partition)
		}
	})
	return ok
}

// errNoShareState is Kafka's INVALID_REQUEST for a read or write of a
// share-partition that was never initialized.
var errNoShareState = fmt.Errorf("%w: the share-partition is not initialized", kerr.InvalidRequest)

// initialize is InitializeShareGroupState for one key.
func (sc *shareCoordinator) initialize(ctx context.Context, k share.Key, stateEpoch int32, startOffset int64) error {
	if !sc.topicPartitionKnown(k) {
		return kerr.UnknownTopicOrPartition
	}
	return sc.do(ctx, k, func(j *share.Journal, now int64) ([]share.Record, error) {
		if st, ok := j.State(k); ok && stateEpoch == -1 {
			stateEpoch = st.StateEpoch
		}
		r, err := j.Initialize(k, max(stateEpoch, 0), startOffset, now)
		if err != nil {
			return nil, err
		}
		return []share.Record{r}, nil
	})
}

// read is ReadShareGroupState for one key: a leader epoch above the stored
// one is recorded (and committed) first; one below is FENCED_LEADER_EPOCH.
func (sc *shareCoordinator) read(ctx context.Context, k share.Key, leaderEpoch int32) (share.PersistedState, error) {
	if !sc.topicPartitionKnown(k) {
		return share.PersistedState{}, kerr.UnknownTopicOrPartition
	}
	var out share.PersistedState
	err := sc.do(ctx, k, func(j *share.Journal, now int64) ([]share.Record, error) {
		st, ok := j.State(k)
		if !ok {
			return nil, errNoShareState
		}
		out = st
		switch {
		case leaderEpoch == -1 || leaderEpoch == st.LeaderEpoch:
			return nil, nil
		case leaderEpoch < st.LeaderEpoch:
			return nil, kerr.FencedLeaderEpoch
		}
		r, err := j.Write(k, st.StateEpoch, leaderEpoch, share.Update{StartOffset: -1, DeliveryCompleteCount: st.DeliveryCompleteCount}, now)
		if err != nil {
			return nil, err
		}
		out.LeaderEpoch = leaderEpoch
		return []share.Record{r}, nil
	})
	return out, err
}

// write is WriteShareGroupState for one key (stateEpoch or leaderEpoch -1:
// not checked, as Kafka).
func (sc *shareCoordinator) write(ctx context.Context, k share.Key, stateEpoch, leaderEpoch int32, u share.Update) error {
	if !sc.topicPartitionKnown(k) {
		return kerr.UnknownTopicOrPartition
	}
	return sc.do(ctx, k, func(j *share.Journal, now int64) ([]share.Record, error) {
		st, ok := j.State(k)
		if !ok {
			return nil, errNoShareState
		}
		if stateEpoch == -1 {
			stateEpoch = st.StateEpoch
		}
		if leaderEpoch == -1 {
			leaderEpoch = st.LeaderEpoch
		}
		r, err := j.Write(k, stateEpoch, leaderEpoch, u, now)
		if err != nil {
			return nil, err
		}
		return []share.Record{r}, nil
	})
}

// delete is DeleteShareGroupState for one key: tombstones, nothing for a
// key with no state (success, as Kafka).
func (sc *shareCoordinator) delete(ctx context.Context, k share.Key) error {
	if !sc.topicPartitionKnown(k) {
		return kerr.UnknownTopicOrPartition
	}
	return sc.do(ctx, k, func(j *share.Journal, _ int64) ([]share.Record, error) {
		if _, ok := j.State(k); !ok {
			return nil, nil
		}
		return j.Delete(k), nil
	})
}

// summary is ReadShareGroupStateSummary for one key; ok is false for a key
// with no state (Kafka answers start offset -1 without an error).
func (sc *shareCoordinator) summary(ctx context.Context, k share.Key) (st share.PersistedState, ok bool, err error) {
	if !sc.topicPartitionKnown(k) {
		return st, false, kerr.UnknownTopicOrPartition
	}
	err = sc.do(ctx, k, func(j *share.Journal, _ int64) ([]share.Record, error) {
		st, ok = j.State(k)
		st.Batches = nil
		return nil, nil
	})
	return st, ok, err
}

// leads reports whether this broker leads (loading or loaded) k's state
// partition, so the persister asks in process.
func (sc *shareCoordinator) leads(k share.Key) bool {
	index, err := sc.partitionOf(k)
	if err != nil {
		return false
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.parts[index] != nil
}

// findShareCoordinator answers one key of FindCoordinator key type SHARE
// ("group:topicId:partition"): the leader of its __share_group_state
// partition.
func (n *Node) findShareCoordinator(key, listener string) coordinatorAnswer {
	a := coordinatorAnswer{node: -1, port: -1, err: kerr.CoordinatorNotAvailable}
	k, ok := parseShareCoordinatorKey(key)
	if !ok {
		a.err = kerr.InvalidRequest
		return a
	}
	n.view(func(st *metadata.State) {
		t, ok := st.TopicByName(shareStateTopic)
		if !ok || len(st.Partitions(t.ID)) == 0 {
			return
		}
		if p, ok := st.Partition(t.ID, sharePartitionFor(k, int32(len(st.Partitions(t.ID))))); ok {
			a = n.coordinatorOn(st, p, listener, a)
		}
	})
	return a
}
