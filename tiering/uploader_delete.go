package tiering

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
)

// Deletion, in one order everywhere (remote retention, orphans, redundant
// segments, deleted topics):
//
//	DELETE_STARTED committed (readers stop using the segment)
//	  → its objects deleted (a missing one is fine: Delete is idempotent)
//	  → the manifest drops it (one conditional write per batch)
//	  → DELETE_FINISHED committed (the segment leaves the image)
//
// A crash anywhere leaves a DELETE_STARTED segment, which the next pass
// (of this leader or the next) resumes from the top; every step is
// idempotent. Objects no record names (a partial delete followed by a
// manual DELETE_FINISHED, a manual mess) are found by listing the
// partition's prefix on Lead and every 10 minutes.

// errNoManifest ends a manifest update that would otherwise create a
// manifest just to remove segments from it.
var errNoManifest = errors.New("tiering: no manifest")

// startDelete commits DELETE_STARTED for every segment not already
// there, as the leader of epoch (metadata.UnknownLeaderEpoch: the janitor).
func (u *Uploader) startDelete(ctx context.Context, segs []metadata.RemoteSegmentInfo, epoch int32) error {
	for _, s := range segs {
		if s.State == metadata.DeleteStarted {
			continue
		}
		if err := u.commit(ctx, s, metadata.DeleteStarted, epoch); err != nil {
			return err
		}
	}
	return nil
}

// deleteObjects deletes the objects of segs, of topic name topic.
func (u *Uploader) deleteObjects(ctx context.Context, topic string, segs []metadata.RemoteSegmentInfo) error {
	for _, s := range segs {
		rs := FromInfo(topic, s)
		for _, ext := range allSegmentExts {
			key := rs.Key(u.cfg.Prefix, ext)
			if err := u.retry(ctx, "delete "+key, func() error { return u.cfg.Store.Delete(ctx, key) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// finishDelete commits DELETE_FINISHED for every segment.
func (u *Uploader) finishDelete(ctx context.Context, segs []metadata.RemoteSegmentInfo, epoch int32) error {
	for _, s := range segs {
		if err := u.commit(ctx, s, metadata.DeleteFinished, epoch); err != nil {
			return err
		}
	}
	return nil
}

// dropFromManifest removes segs from p's manifest and raises its log
// start to logStart (-1: leave it), in one conditional write. A missing
// manifest is left missing.
func (u *Uploader) dropFromManifest(ctx context.Context, p Partition, segs []metadata.RemoteSegmentInfo, logStart int64) error {
	gone := make(map[uuid.UUID]bool, len(segs))
	for _, s := range segs {
		gone[s.SegmentID] = true
	}
	key := ManifestKey(u.cfg.Prefix, p.Topic, p.TopicID, p.Index)
	err := u.retry(ctx, "manifest drop", func() error {
		_, err := u.ms.Update(ctx, key, func(m *Manifest) error {
			if m.Topic == "" {
				return errNoManifest
			}
			m.Segments = slices.DeleteFunc(m.Segments, func(s Segment) bool { return gone[s.SegmentID] })
			if logStart > m.LogStartOffset {
				m.LogStartOffset = logStart
			}
			return nil
		})
		if errors.Is(err, errNoManifest) {
			return nil
		}
		return err
	})
	if err == nil {
		u.compactManifest(ctx, key)
	}
	return err
}

// deleteSegments runs the whole deletion of segs (all of one partition
// of topic). With withManifest the manifest drops them and its log start
// is raised to logStart (-1: left as it is). epoch is the leader epoch the
// deletion acts under.
func (u *Uploader) deleteSegments(ctx context.Context, topic string, segs []metadata.RemoteSegmentInfo, withManifest bool, logStart int64, epoch int32) error {
	if len(segs) == 0 {
		return nil
	}
	if err := u.startDelete(ctx, segs, epoch); err != nil {
		return err
	}
	if err := u.deleteObjects(ctx, topic, segs); err != nil {
		return err
	}
	if withManifest {
		p := Partition{Topic: topic, TopicID: segs[0].TopicID, Index: segs[0].Partition}
		if err := u.dropFromManifest(ctx, p, segs, logStart); err != nil {
			return err
		}
	}
	return u.finishDelete(ctx, segs, epoch)
}

// deleteOrphans runs an ActDeleteOrphans action (planOrphans chose its
// segments: COPY_STARTED orphans, then interrupted deletions to resume).
func (u *Uploader) deleteOrphans(ctx context.Context, lp LeaderPartition, a Action, epoch int32) error {
	if err := u.deleteSegments(ctx, lp.Topic, a.Segments, true, a.LogStart, epoch); err != nil {
		u.log.Warn("delete orphaned remote segments", "topic", lp.Topic, "partition", lp.Index, "err", err)
		return err
	}
	u.metrics.orphans.Add(float64(a.Orphans))
	u.metrics.remoteDeleted.Add(float64(len(a.Segments) - a.Orphans))
	if a.Orphans > 0 {
		u.log.Info("orphaned remote segments deleted", "topic", lp.Topic, "partition", lp.Index, "count", a.Orphans)
	}
	return nil
}

// scanOrphanObjects lists t's prefix and deletes the segment objects
// PlanOrphanObjects names. The listing comes first and the snapshot is
// gathered after it: an object is only ever put after its COPY_STARTED is
// committed, so a listed object of a live copy is named by the metadata
// read later.
func (u *Uploader) scanOrphanObjects(ctx context.Context, t *partTask) error {
	p := t.lp.Partition
	objs, err := u.cfg.Store.List(ctx, PartitionPrefix(u.cfg.Prefix, p.Topic, p.TopicID, p.Index))
	if err != nil {
		u.metrics.errors.Inc()
		return err
	}
	in := PlanInput{
		Remote:      u.cfg.Meta.RemoteSegments(p.TopicID, p.Index),
		Inflight:    u.inflightIDs(),
		Now:         u.cfg.Now(),
		OrphanGrace: u.cfg.OrphanGrace,
	}
	var firstErr error
	for _, key := range PlanOrphanObjects(in, objs) {
		if err := u.cfg.Store.Delete(ctx, key); err != nil {
			u.metrics.errors.Inc()
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		u.log.Info("orphaned object deleted", "key", key)
	}
	return firstErr
}

// deleteRedundant runs an ActDeleteRedundant action: finished segments
// another covers wholly (the manifest already dropped them).
func (u *Uploader) deleteRedundant(ctx context.Context, lp LeaderPartition, a Action, epoch int32) error {
	if err := u.deleteSegments(ctx, lp.Topic, a.Segments, true, -1, epoch); err != nil {
		u.log.Warn("delete redundant remote segments", "topic", lp.Topic, "partition", lp.Index, "err", err)
		return err
	}
	u.metrics.remoteDeleted.Add(float64(len(a.Segments)))
	return nil
}

// retain runs an ActRetain action (planRetention's choice). Once their
// DELETE_STARTED is committed the log start moves past them
// (Log.SetLogStartOffset, which also drops local segments below), so no
// fetch is sent to a segment being deleted; the manifest is written once
// for the batch.
func (u *Uploader) retain(ctx context.Context, lp LeaderPartition, a Action, epoch int32) error {
	del, newStart := a.Segments, a.LogStart
	if err := u.startDelete(ctx, del, epoch); err != nil {
		u.log.Warn("remote retention", "topic", lp.Topic, "partition", lp.Index, "err", err)
		return err
	}
	if err := lp.Log.SetLogStartOffset(newStart); err != nil {
		u.log.Warn("advance log start after remote retention", "topic", lp.Topic, "partition", lp.Index, "offset", newStart, "err", err)
	}
	if err := u.deleteObjects(ctx, lp.Topic, del); err != nil {
		return err
	}
	if err := u.dropFromManifest(ctx, lp.Partition, del, newStart); err != nil {
		return err
	}
	if err := u.finishDelete(ctx, del, epoch); err != nil {
		return err
	}
	u.metrics.remoteDeleted.Add(float64(len(del)))
	u.log.Info("remote retention deleted segments", "topic", lp.Topic, "partition", lp.Index, "count", len(del), "log_start", newStart)
	return nil
}

func compareIDs(a, b uuid.UUID) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}

// janitorLoop deletes the remote data of deleted topics every Interval
// (or Kick) while this broker is the janitor.
func (u *Uploader) janitorLoop() {
	defer u.wg.Done()
	tick := time.NewTicker(u.cfg.Interval)
	defer tick.Stop()
	for {
		if u.cfg.Meta.Janitor() {
			u.cleanDeletedTopics(u.ctx)
		}
		u.janitorPasses.Add(1)
		select {
		case <-u.ctx.Done():
			return
		case <-tick.C:
		case <-u.janitorKick:
		}
	}
}

// cleanDeletedTopics deletes, for every topic with remote segments that
// no longer exists: DELETE_STARTED on all its segments, their objects,
// then everything left under its topic prefix (manifests, leftovers),
// then DELETE_FINISHED on all. A topic whose name is unknown cannot have
// its keys built: it is logged once and skipped.
func (u *Uploader) cleanDeletedTopics(ctx context.Context) {
	byTopic := map[uuid.UUID][]metadata.TopicPartition{}
	var order []uuid.UUID
	for _, tp := range u.cfg.Meta.RemotePartitions() {
		if _, ok := byTopic[tp.TopicID]; !ok {
			order = append(order, tp.TopicID)
		}
		byTopic[tp.TopicID] = append(byTopic[tp.TopicID], tp)
	}
	for _, id := range order {
		if ctx.Err() != nil {
			return
		}
		name, exists, known := u.cfg.Meta.TopicName(id)
		if exists {
			continue
		}
		if !known {
			u.mu.Lock()
			logged := u.unknown[id]
			u.unknown[id] = true
			u.mu.Unlock()
			if !logged {
				u.log.Error("deleted topic has remote segments but no known name; its objects cannot be found", "topic_id", id)
			}
			continue
		}
		var segs []metadata.RemoteSegmentInfo
		for _, tp := range byTopic[id] {
			segs = append(segs, u.cfg.Meta.RemoteSegments(tp.TopicID, tp.Partition)...)
		}
		if err := u.deleteTopic(ctx, name, id, segs); err != nil {
			u.log.Warn("delete remote data of deleted topic", "topic", name, "topic_id", id, "err", err)
			continue
		}
		u.metrics.remoteDeleted.Add(float64(len(segs)))
		u.log.Info("remote data of deleted topic deleted", "topic", name, "topic_id", id, "segments", len(segs))
	}
}

// The janitor acts under no leader epoch: the topic, and with it every
// partition's leader, is gone (the controller does not fence it).
func (u *Uploader) deleteTopic(ctx context.Context, name string, id uuid.UUID, segs []metadata.RemoteSegmentInfo) error {
	if err := u.startDelete(ctx, segs, metadata.UnknownLeaderEpoch); err != nil {
		return err
	}
	if err := u.deleteObjects(ctx, name, segs); err != nil {
		return err
	}
	prefix := TopicPrefix(u.cfg.Prefix, name, id)
	if err := u.retry(ctx, "list "+prefix, func() error {
		objs, err := u.cfg.Store.List(ctx, prefix)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := u.cfg.Store.Delete(ctx, o.Key); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return u.finishDelete(ctx, segs, metadata.UnknownLeaderEpoch)
}
