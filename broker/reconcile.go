package broker

// The metadata follower and the reconcile loop: followMetadata applies the
// controller's metadata log to this broker's view (applyDelta), and after
// each delta reconcile makes the hosted partitions match it: logs opened
// (partition.metadata checked or written, producer state loaded), leader
// flags and epochs set, tiering and the group coordinator told, partitions
// of deleted topics dropped. At start, once caught up, the logs on disk
// the metadata does not account for are set aside as stray, or deleted
// when it proves them a replica reassigned away (removeStrayLogs). Only
// the follower goroutine reconciles; heartbeats report the last
// reconciled offset.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/batch"
	"github.com/strata-io/strata/storage"
)

// metadataOffset is the offset heartbeats report: the last one whose
// partitions are reconciled, so "caught up" (and so unfenced, and so
// serving) implies every log the metadata promises is open.
func (n *Node) metadataOffset() int64 {
	n.metaMu.RLock()
	defer n.metaMu.RUnlock()
	return n.reconciled
}

// appliedOffset is the last metadata offset applied to the view.
func (n *Node) appliedOffset() int64 {
	n.metaMu.RLock()
	defer n.metaMu.RUnlock()
	return n.meta.Offset()
}

// followMetadata applies the controller's metadata log to this broker's
// view and reconciles the partitions after each delta. After a broken
// stream it watches again from the last applied offset + 1.
func (n *Node) followMetadata() {
	for n.ctx.Err() == nil {
		wctx, cancel := context.WithCancel(n.ctx)
		n.watchMu.Lock()
		n.rewatch = cancel
		n.watchMu.Unlock()
		n.followOnce(wctx)
		cancel()
	}
}

// followOnce follows one watch until it fails or wctx ends (Close, or
// reopenWatch: the view stayed behind the controller leader).
func (n *Node) followOnce(wctx context.Context) {
	w, err := n.svc.Watch(wctx, n.appliedOffset()+1)
	if err != nil {
		if wctx.Err() == nil {
			n.logger.Warn("broker: watch metadata", "err", err)
		}
		select {
		case <-wctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		return
	}
	defer w.Close()
	for {
		d, err := w.Next(wctx)
		if err != nil {
			if wctx.Err() == nil {
				n.logger.Warn("broker: metadata stream ended", "err", err)
			}
			return
		}
		n.applyDelta(d)
	}
}

// reopenWatch makes the metadata follower drop its watch and watch again
// (a remote one reconnects to the next controller address).
func (n *Node) reopenWatch() {
	n.watchMu.Lock()
	defer n.watchMu.Unlock()
	if n.rewatch != nil {
		n.rewatch()
	}
}

// metadataLag tells a metadata view that stays behind the controller
// leader (heartbeat answers carry the leader's offset) from one that is
// merely a delta or two late: behind means below the offset the leader
// had when the view was first seen below it, for longer than the timeout
// (controller.quorum.request.timeout.ms). A view that keeps up, however
// busy the log, reaches that offset in time and starts over; a stream
// stuck on a lagging controller or a dead connection does not.
type metadataLag struct {
	target int64     // the leader's offset the view must reach
	since  time.Time // when it was first seen below target; zero: not behind
}

// observe takes one heartbeat answer: the view's applied offset and the
// leader's (0: a controller that does not say) at now. It reports whether
// the view has been behind for longer than timeout, and then starts over.
func (l *metadataLag) observe(now time.Time, applied, leader int64, timeout time.Duration) bool {
	if !l.since.IsZero() && applied >= l.target {
		l.since = time.Time{}
	}
	if l.since.IsZero() {
		if leader > applied {
			l.target, l.since = leader, now
		}
		return false
	}
	if now.Sub(l.since) > timeout {
		l.since = time.Time{}
		return true
	}
	return false
}

func (n *Node) applyDelta(d controller.Delta) {
	if h := n.deltaHook.Load(); h != nil {
		(*h)(d)
	}
	n.metaMu.Lock()
	if d.Image != nil {
		n.meta = d.Image
	} else if d.Offset > n.meta.Offset() {
		if err := n.meta.ApplyBatch(d.Offset, d.Records); err != nil {
			n.logger.Debug("broker: metadata records refused (as by the controller)", "offset", d.Offset, "err", err)
		}
	}
	n.refreshAuthorizer(d)
	n.refreshQuotas(d)
	n.metaMu.Unlock()
	n.reconcile()
	n.tier.applied(d) // replica_tier.go: remote-uploaded offsets of every replica
	n.metaMu.Lock()
	n.reconciled = n.meta.Offset()
	close(n.metaNotify)
	n.metaNotify = make(chan struct{})
	n.metaMu.Unlock()
}

// wantedPartition is one partition of the metadata image as reconcile sees
// it.
type wantedPartition struct {
	topic   string
	id      uuid.UUID
	index   int32
	leader  bool
	epoch   int32
	configs map[string]string
	// The partition's replication state in the image.
	leaderID       int32 // metadata.NoLeader when offline
	replicas       []int32
	isr            []int32
	elr            []int32
	partitionEpoch int32
}

// reconcile makes the hosted partitions match the metadata view: a log is
// opened (and partition.metadata written) for every partition this broker
// leads; leadership and epochs follow the image; partitions of deleted
// topics are closed and their logs deleted. Only the follower goroutine
// calls it.
func (n *Node) reconcile() {
	n.reconcileMu.Lock()
	defer n.reconcileMu.Unlock()
	var want []wantedPartition
	n.metaMu.RLock()
	n.leaderQuota.setRate(n.replicationRate(n.meta, "leader.replication.throttled.rate"))
	n.followerQuota.setRate(n.replicationRate(n.meta, "follower.replication.throttled.rate"))
	for _, t := range n.meta.Topics() {
		cfgs := n.effectiveTopicConfigs(n.meta, t.Name) // dynamic broker configs, then the topic's own
		for _, p := range n.meta.Partitions(t.ID) {
			isReplica := false
			for _, r := range p.Replicas {
				isReplica = isReplica || r == n.cfg.NodeID
			}
			if !isReplica {
				continue
			}
			want = append(want, wantedPartition{topic: t.Name, id: t.ID, index: p.Partition,
				leader: p.Leader == n.cfg.NodeID, epoch: p.LeaderEpoch, configs: cfgs,
				leaderID: p.Leader, replicas: p.Replicas, isr: p.ISR, elr: p.ELR, partitionEpoch: p.PartitionEpoch})
		}
	}
	n.metaMu.RUnlock()

	seen := map[tpKey]bool{}
	for _, w := range want {
		k := tpKey{w.topic, w.index}
		seen[k] = true
		n.metaMu.Lock()
		prev, had := n.topicCfgs[w.topic]
		changed := !had || !maps.Equal(prev, w.configs)
		n.topicCfgs[w.topic] = w.configs
		n.metaMu.Unlock()
		scfg := topicStorageConfig(n.cfg.Storage, w.configs)
		if changed && had {
			n.store.UpdateConfig(w.topic, scfg)
		}
		n.partsMu.RLock()
		p := n.parts[k]
		n.partsMu.RUnlock()
		if p != nil && p.topicID != w.id {
			n.dropPartition(k, true) // the topic was deleted and re-created under the same name
			p = nil
		}
		if p == nil {
			var err error
			if p, err = n.openPartition(w, scfg); err != nil {
				n.logger.Error("broker: open partition", "topic", w.topic, "partition", w.index, "err", err)
				continue
			}
		}
		n.updateThrottles(p, w) // replica_throttle.go
		if w.leader {
			n.makeLeader(p, w) // replica_leader.go
		} else {
			p.resignLeadership() // replica_leader.go: acks=all waiters fail
			n.makeFollower(p, w) // replica_fetcher.go
		}
		n.tier.track(p, w.leader, scfg.RemoteStorageEnable)
		if w.topic == offsetsTopic {
			n.groups.offsetsPartitionChanged(w.index, p)
		}
		if w.topic == shareStateTopic {
			n.shares.sharePartitionChanged(w.index, p)
		}
		if w.topic == txnStateTopic {
			n.txns.txnPartitionChanged(w.index, p)
		}
	}
	n.partsMu.RLock()
	var gone []tpKey
	for k := range n.parts {
		if !seen[k] {
			gone = append(gone, k)
		}
	}
	n.partsMu.RUnlock()
	for _, k := range gone {
		n.dropPartition(k, true)
	}
	n.groups.cgs.imageChanged() // KIP-848 groups: topics created, deleted, grown
	n.groups.sgs.imageChanged() // share groups too
}

func (n *Node) openPartition(w wantedPartition, scfg storage.Config) (*partition, error) {
	l, err := n.store.GetOrCreate(w.topic, w.index, scfg)
	if err != nil {
		return nil, err
	}
	l.SetConfig(scfg)
	id, ok, err := readPartitionMetadata(n.fs, l.Dir())
	if err != nil {
		return nil, err
	}
	if ok && id != w.id {
		// A log left from another topic of this name (deleted while this
		// node was down, or lost with the metadata): set it aside, then
		// start over.
		n.markStray(l, fmt.Sprintf("the metadata names topic id %s", encodeTopicID(w.id)))
		if _, ok := n.store.Get(w.topic, w.index); ok {
			return nil, fmt.Errorf("broker: %s-%d: could not set aside the log of topic id %s", w.topic, w.index, id)
		}
		if l, err = n.store.GetOrCreate(w.topic, w.index, scfg); err != nil {
			return nil, err
		}
		ok = false
	}
	if !ok {
		if err := writePartitionMetadata(n.fs, l.Dir(), w.id); err != nil {
			return nil, err
		}
	}
	p := newPartition(w.topic, w.id, w.index, l)
	if res, err := p.loadProducerState(n.pcells.get(w.topic, w.index), time.Now().UnixMilli()); err != nil {
		return nil, err
	} else if res.SnapshotErr != nil {
		n.logger.Warn("broker: producer snapshot unusable, replayed the log", "topic", w.topic, "partition", w.index, "err", res.SnapshotErr)
	}
	p.tm = n.metrics.topic(w.topic)
	// Published not led, whatever the image says: makeLeader (next, in
	// reconcile) sets the leadership with its replication state. Led
	// without one, an append would raise the HW to the log end
	// (maybeIncrementHWLocked) and acknowledge acks=all at once.
	p.leaderEpoch.Store(w.epoch)
	n.partsMu.Lock()
	n.parts[tpKey{w.topic, w.index}] = p
	n.partsMu.Unlock()
	return p, nil
}

// dropPartition stops hosting a partition; with deleteLog its log is
// deleted (the topic is gone).
func (n *Node) dropPartition(k tpKey, deleteLog bool) {
	n.partsMu.Lock()
	p := n.parts[k]
	delete(n.parts, k)
	n.partsMu.Unlock()
	if p == nil {
		return
	}
	n.metrics.releaseTopic(k.topic)
	p.leader.Store(false)
	p.resignLeadership()
	p.markDropped()
	n.stopFollowing(p) // no follower append after the log is deleted
	n.tier.untrack(p)
	if k.topic == offsetsTopic {
		n.groups.offsetsPartitionChanged(k.partition, nil)
	}
	if k.topic == shareStateTopic {
		n.shares.sharePartitionChanged(k.partition, nil)
	}
	if k.topic == txnStateTopic {
		n.txns.txnPartitionChanged(k.partition, nil)
	}
	p.wake() // fetches waiting on it answer now
	if deleteLog {
		n.pcells.forget(k.topic, k.partition, p.prod)
		if err := n.store.Delete(k.topic, k.partition); err != nil {
			n.logger.Error("broker: delete log", "topic", k.topic, "partition", k.partition, "err", err)
		}
	}
}

// The logs on disk a broker's metadata no longer accounts for, judged once
// at start (removeStrayLogs) when the view has caught up (the controller
// unfenced this broker: its view reached the offset it registered at).
// While the broker runs, reconcile drops the partitions it stops hosting
// (dropPartition deletes a removed replica's log, as Kafka's StopReplica
// with delete); these are the logs it could not see go: the broker was
// down, and its view came from a snapshot image that never showed the
// change.
//
// Kafka's KRaft broker (LogManager.isStrayKraftReplica, KAFKA-14616)
// renames each of them <dir>-stray and keeps it. Strata does so where the
// metadata does not prove the data redundant, and deletes where it does:
//
//   - no topic of that name, no such partition index, or a
//     partition.metadata naming another topic id: a topic deleted (or
//     re-created) while this node was down, or the only copy of data
//     whose metadata was lost (an emptied metadata log): set aside as
//     <dir>.<uuid>-stray, kept for the operator (`strata tier restore
//     --all` brings back tiered topics);
//   - the partition exists under the very topic id its partition.metadata
//     names, and this broker is not among its replicas (adding and
//     removing ones included): a replica reassigned away while the broker
//     was down. Reassignment only drops a replica once every new one is in
//     the ISR, so the partition's data lives on its replicas, and the log
//     is deleted (renamed <dir>.<uuid>-delete, removed in the background)
//     exactly as the live path would have; unless the partition is
//     offline (no leader): then nothing proves its replicas hold the data,
//     and the log is set aside instead;
//   - a partition this broker hosts is kept; one without partition.metadata
//     (or with one that cannot be read) that it does not host is set aside
//     (KAFKA-16814: no topic id, no proof).
//
// An empty image (a broker whose controller lost its metadata) has no
// topics, so nothing is ever deleted for lack of metadata: at worst set
// aside.

// strayAction is what removeStrayLogs does with one log.
type strayAction int

const (
	keepLog   strayAction = iota // hosted here: left alone
	strayLog                     // renamed <dir>.<uuid>-stray, kept
	deleteLog                    // a removed replica: deleted
)

// judgeLog decides the fate of broker self's log of topic-part whose
// partition.metadata names diskID (hasID false: it has none), from the
// metadata image st; why says it for the log line.
func judgeLog(st *metadata.State, self int32, topic string, part int32, diskID uuid.UUID, hasID bool) (act strayAction, why string) {
	t, ok := st.TopicByName(topic)
	if !ok {
		return strayLog, "the metadata has no such topic"
	}
	p, ok := st.Partition(t.ID, part)
	if !ok {
		return strayLog, "the metadata has no such partition"
	}
	if hasID && diskID != t.ID {
		return strayLog, fmt.Sprintf("the metadata names topic id %s", encodeTopicID(t.ID))
	}
	if slices.Contains(p.Replicas, self) {
		return keepLog, ""
	}
	if !hasID {
		return strayLog, "not a replica here, and no partition.metadata to tell its topic id"
	}
	if p.Leader == metadata.NoLeader {
		return strayLog, fmt.Sprintf("not a replica here, but the partition is offline (replicas %v): this may be the last copy", p.Replicas)
	}
	return deleteLog, fmt.Sprintf("not a replica here: the partition's replicas are %v", p.Replicas)
}

// removeStrayLogs judges every loaded log that no hosted partition holds
// by judgeLog, and sets it aside or deletes it. It runs once the metadata
// has caught up, under reconcileMu (so never on a log reconcile is
// opening), and judges by the metadata only, so a log that failed to open
// is kept.
func (n *Node) removeStrayLogs() {
	n.reconcileMu.Lock()
	defer n.reconcileMu.Unlock()
	for _, l := range n.store.Logs() {
		if strings.HasPrefix(l.Topic(), "__cluster_metadata") {
			continue
		}
		k := tpKey{l.Topic(), l.Partition()}
		n.partsMu.RLock()
		_, hosted := n.parts[k]
		n.partsMu.RUnlock()
		if hosted {
			continue // reconcile's: it drops (and deletes) what it stops hosting
		}
		id, hasID, err := readPartitionMetadata(n.fs, l.Dir())
		if err != nil {
			// Judged as without one: kept if hosted, else set aside,
			// never deleted.
			n.logger.Warn("broker: partition.metadata unreadable", "topic", k.topic, "partition", k.partition, "dir", l.Dir(), "err", err)
			id, hasID = uuid.Nil, false
		}
		var act strayAction
		var why string
		n.view(func(st *metadata.State) { act, why = judgeLog(st, n.cfg.NodeID, k.topic, k.partition, id, hasID) })
		switch act {
		case strayLog:
			n.markStray(l, why)
		case deleteLog:
			start, end, dir := l.LogStartOffset(), l.LogEndOffset(), l.Dir()
			if err := n.store.Delete(k.topic, k.partition); err != nil {
				n.logger.Error("broker: delete the log of a removed replica", "topic", k.topic, "partition", k.partition, "dir", dir, "err", err)
				continue
			}
			n.logger.Info("broker: deleted the log of a replica removed while this broker was down", "topic", k.topic, "partition", k.partition,
				"topic_id", encodeTopicID(id), "log_start", start, "log_end", end, "why", why, "dir", dir)
		}
	}
}

// markStray renames l's directory <dir>.<uuid>-stray (Kafka's stray
// logs), logging a warning with what it held.
func (n *Node) markStray(l *storage.Log, why string) {
	topic, part := l.Topic(), l.Partition()
	start, end := l.LogStartOffset(), l.LogEndOffset()
	id, _, _ := readPartitionMetadata(n.fs, l.Dir())
	to, err := n.store.MarkStray(topic, part)
	if err != nil {
		n.logger.Error("broker: set aside stray log", "topic", topic, "partition", part, "dir", l.Dir(), "err", err)
		return
	}
	n.logger.Warn("broker: stray log set aside, not deleted", "topic", topic, "partition", part, "topic_id", encodeTopicID(id),
		"log_start", start, "log_end", end, "why", why, "dir", to)
}

// topicStorageConfig overlays a topic's configs (Kafka names, validated by
// the controller) on the broker's defaults.
func topicStorageConfig(base storage.Config, m map[string]string) storage.Config {
	c := base
	i64 := func(name string, dst *int64) {
		if v, ok := m[name]; ok {
			if x, err := strconv.ParseInt(v, 10, 64); err == nil {
				*dst = x
			}
		}
	}
	i32 := func(name string, dst *int) {
		var x int64 = int64(*dst)
		i64(name, &x)
		*dst = int(x)
	}
	i64(metadata.ConfigSegmentBytes, &c.SegmentBytes)
	i64(metadata.ConfigSegmentMs, &c.SegmentMs)
	i64(metadata.ConfigSegmentJitterMs, &c.SegmentJitterMs)
	i32(metadata.ConfigSegmentIndexBytes, &c.SegmentIndexBytes)
	i32(metadata.ConfigIndexIntervalBytes, &c.IndexIntervalBytes)
	i32(metadata.ConfigMaxMessageBytes, &c.MaxMessageBytes)
	i64(metadata.ConfigFlushMessages, &c.FlushMessages)
	i64(metadata.ConfigFlushMs, &c.FlushMs)
	i64(metadata.ConfigRetentionMs, &c.RetentionMs)
	i64(metadata.ConfigRetentionBytes, &c.RetentionBytes)
	i64(metadata.ConfigLocalRetentionMs, &c.LocalRetentionMs)
	i64(metadata.ConfigLocalRetentionBytes, &c.LocalRetentionBytes)
	i64(metadata.ConfigMessageTimestampBeforeMaxMs, &c.TimestampBeforeMaxMs)
	i64(metadata.ConfigMessageTimestampAfterMaxMs, &c.TimestampAfterMaxMs)
	i64(metadata.ConfigFileDeleteDelayMs, &c.FileDeleteDelayMs)
	i64(metadata.ConfigDeleteRetentionMs, &c.DeleteRetentionMs)
	i64(metadata.ConfigMinCompactionLagMs, &c.MinCompactionLagMs)
	i64(metadata.ConfigMaxCompactionLagMs, &c.MaxCompactionLagMs)
	if v, ok := m[metadata.ConfigMinCleanableDirtyRatio]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			c.MinCleanableDirtyRatio = f
		}
	}
	if v, ok := m[metadata.ConfigRemoteStorageEnable]; ok {
		c.RemoteStorageEnable = strings.EqualFold(v, "true")
	}
	if v, ok := m[metadata.ConfigMessageTimestampType]; ok {
		c.TimestampType = batch.TimestampType(0)
		if v == "LogAppendTime" {
			c.TimestampType = batch.TimestampType(1)
		}
	}
	if v, ok := m[metadata.ConfigPreallocate]; ok {
		c.Preallocate = strings.EqualFold(v, "true")
	}
	if v, ok := m[metadata.ConfigCleanupPolicy]; ok {
		c.CleanupPolicy = v
	}
	return c
}
