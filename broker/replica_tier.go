package broker

// Tiered topics with followers (KIP-405 with replication, issue 14).
//
// Only the leader uploads (tier.track hands the uploader the partitions
// this broker leads, and resigns them the moment it stops leading). A
// follower keeps a full local copy above the leader's local log start, and
// its local retention (local.retention.*) may delete only what the remote
// tier holds: its remote-uploaded offset follows the controller's
// COPY_FINISHED records, set here from every metadata delta
// (tier.applied) and, for a partition it starts following, from the image
// (tier.followUploaded). The leader's own copies set the same offset on
// the leader.
//
// A follower whose fetch offset is below the leader's local log start
// gets OFFSET_MOVED_TO_TIERED_STORAGE: the leader no longer holds those
// records locally, the remote tier does. The fetcher then calls
// rebuildFromTier (KIP-405's follower tier state machine, REPLICATION.md
// §1.13): the remote segment covering the leader's local start - 1 is
// found in the metadata image (no bucket listing), the log restarts
// empty after its end with the leader's log start, the leader-epoch
// history the remote segments record and the producer snapshot uploaded
// with that segment, and fetching resumes at its end + 1. Reads below the
// new local start are served from the tier should this replica lead.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/tiering"
)

// errTierRebuild wraps every reason rebuildFromTier could not rebuild a
// replica now: remote storage off on this broker or topic, no
// COPY_FINISHED segment covering the offset in this broker's image yet
// (its metadata may lag the leader's), a snapshot that cannot be read.
// All are retriable: the fetcher backs off (replica.fetch.backoff.ms) and
// fetches again, which asks again.
var errTierRebuild = errors.New("broker: cannot rebuild the replica from the remote tier yet")

// followUploaded sets the remote-uploaded offset of a partition this
// broker has just started to follow (or follows again after a restart)
// from the image: the end of its COPY_FINISHED segments + 1. Later
// segments arrive through applied.
func (t *tier) followUploaded(p *partition) {
	if _, end, ok := t.remoteRange(p); ok {
		p.log.SetRemoteUploadedOffset(end + 1)
	}
}

// applied follows a metadata delta the node has just applied and
// reconciled: each COPY_FINISHED segment in it raises the remote-uploaded
// offset of the partition on this broker, leader or follower (the
// uploader raised it already on the leader that copied it; raising is
// idempotent), so local retention on every replica deletes what is
// safely remote and nothing else. A whole image (a metadata snapshot)
// recomputes every followed partition. Cheap: one type switch per record
// of the delta, one image read per COPY_FINISHED record.
func (t *tier) applied(d controller.Delta) {
	if t == nil || !t.ready.Load() {
		return
	}
	if d.Image != nil {
		t.mu.Lock()
		keys := make([]tpKey, 0, len(t.followed))
		for k := range t.followed {
			keys = append(keys, k)
		}
		t.mu.Unlock()
		for _, k := range keys {
			if p := t.n.partition(k.topic, k.partition); p != nil {
				t.followUploaded(p)
			}
		}
		return
	}
	for _, rec := range d.Records {
		r, ok := rec.(*metadata.RemoteSegmentRecord)
		if !ok || r.State != metadata.CopyFinished {
			continue
		}
		var name string
		var exists bool
		t.n.view(func(st *metadata.State) { name, exists, _ = st.TopicNameByID(r.TopicID) })
		if !exists {
			continue
		}
		if p := t.n.partition(name, r.Partition); p != nil && p.topicID == r.TopicID {
			p.log.SetRemoteUploadedOffset(r.EndOffset + 1)
		}
	}
}

// rebuildFromTier rebuilds follower p from the remote tier after the
// leader answered its fetch with OFFSET_MOVED_TO_TIERED_STORAGE, the
// leader's log start and local log start being leaderLogStart and
// leaderLocalStart (from ListOffsets EARLIEST / EARLIEST_LOCAL, or the
// fetch response). It returns the offset to fetch from next: the end + 1
// of the remote segment holding leaderLocalStart - 1, which the leader
// holds locally. Called by the fetcher, without p.appendMu held.
func (n *Node) rebuildFromTier(ctx context.Context, p *partition, leaderLogStart, leaderLocalStart int64) (resumeAt int64, err error) {
	return n.rebuildFromTierAt(ctx, p, leaderLogStart, leaderLocalStart-1)
}

// rebuildFromTierAt rebuilds p from the remote segment holding offset
// (leaderLocalStart - 1 for rebuildFromTier; the last tiered offset for
// an empty follower starting there, KIP-1023) and returns that segment's
// end + 1. In order:
//
//  1. the COPY_FINISHED segment holding offset, from the image;
//  2. its producer snapshot (the .snapshot object: the producer state at
//     its end), fetched and decoded before anything changes, so a bad or
//     missing object leaves the replica as it was;
//  3. the leader-epoch history up to its end, from the epoch entries of
//     every COPY_FINISHED segment up to it (the image's copy of each
//     segment's .epochs object), trimmed to the log start as the log's
//     own cache would be;
//  4. under p.appendMu (no append in between): the log restarted empty at
//     end + 1 with the epochs and the snapshot (storage's
//     Log.RestartFromTier, one call), and the partition's producer state
//     replaced by the snapshot's;
//  5. the remote-uploaded offset and the high watermark raised to end + 1
//     (everything below is committed and remote).
func (n *Node) rebuildFromTierAt(ctx context.Context, p *partition, leaderLogStart, offset int64) (int64, error) {
	t := n.tier
	if t == nil || !p.log.Config().RemoteStorageEnable {
		return -1, fmt.Errorf("%w: %s-%d: remote storage is not enabled on this broker", errTierRebuild, p.topic, p.index)
	}
	if offset < 0 {
		return -1, fmt.Errorf("%w: %s-%d: no offset below the leader's local start", errTierRebuild, p.topic, p.index)
	}
	var seg metadata.RemoteSegmentInfo
	var ok bool
	var finished []metadata.RemoteSegmentInfo
	n.view(func(st *metadata.State) {
		seg, _, ok = st.FinishedRemoteSegmentAt(p.topicID, p.index, offset)
		if ok {
			for _, s := range st.RemoteSegments(p.topicID, p.index) {
				if s.State == metadata.CopyFinished && s.BaseOffset <= seg.EndOffset {
					finished = append(finished, s)
				}
			}
		}
	})
	if !ok {
		return -1, fmt.Errorf("%w: %s-%d: no remote segment holds offset %d in this broker's metadata", errTierRebuild, p.topic, p.index, offset)
	}
	next := seg.EndOffset + 1
	logStart := min(max(leaderLogStart, 0), next)

	snap, err := t.fetchSnapshot(ctx, tiering.FromInfo(p.topic, seg))
	if err != nil {
		return -1, fmt.Errorf("%w: %s-%d: producer snapshot of segment %s: %w", errTierRebuild, p.topic, p.index, seg.SegmentID, err)
	}
	st := producer.New(producer.Options{})
	if len(snap) > 0 {
		if err := st.Restore(snap); err != nil {
			return -1, fmt.Errorf("%w: %s-%d: producer snapshot of segment %s: %w", errTierRebuild, p.topic, p.index, seg.SegmentID, err)
		}
	} else {
		snap = nil // no producer state was uploaded: none to keep
	}
	epochs := rebuildEpochs(finished, logStart, next)

	p.appendMu.Lock()
	err = p.log.RestartFromTier(logStart, next, epochs, snap)
	if err == nil {
		c := p.prod
		c.mu.Lock()
		c.st, c.lastExpiryMs = st, time.Now().UnixMilli()
		c.mu.Unlock()
	}
	p.appendMu.Unlock()
	if err != nil {
		return -1, fmt.Errorf("broker: %s-%d: rebuild from the remote tier: %w", p.topic, p.index, err)
	}
	p.log.SetRemoteUploadedOffset(next)
	p.raiseHW(next)
	t.rebuilds.Add(1)
	n.logger.Info("broker: replica rebuilt from the remote tier", "topic", p.topic, "partition", p.index,
		"log_start", logStart, "resume_at", next, "segment", seg.SegmentID, "epochs", len(epochs), "producer_snapshot_bytes", len(snap))
	return next, nil
}

// fetchSnapshot reads a remote segment's producer snapshot, from its
// packed .meta object or its own .snapshot object (empty: the segment
// was uploaded without one). The store times and retries each request;
// ctx bounds the whole.
func (t *tier) fetchSnapshot(ctx context.Context, seg tiering.RemoteSegment) ([]byte, error) {
	return tiering.ReadSegmentFile(ctx, t.n.remote, "", seg, tiering.ExtSnapshot)
}

// rebuildEpochs is the leader-epoch history of a replica rebuilt from the
// remote tier to restart at next with log start logStart, from the
// COPY_FINISHED segments up to the one it restarts after: each epoch
// starts at the lowest start offset any segment records for it (a
// segment records the epoch in force at its base with its start clamped
// to the base, so an earlier segment knows the true start); entries at or
// above next go; an epoch whose start is at or below an older epoch's is
// kept and the older dropped (the log cache's Assign rule: the older one
// wrote nothing the newer did not overwrite); finally the entries at or
// below logStart collapse into the latest of them, starting at logStart
// (the cache's TruncateFromStart). The result has strictly increasing
// epochs and start offsets. Pure.
func rebuildEpochs(segs []metadata.RemoteSegmentInfo, logStart, next int64) []checkpoint.EpochEntry {
	starts := map[int32]int64{}
	for _, s := range segs {
		for _, e := range s.LeaderEpochs {
			if e.StartOffset >= next || e.Epoch < 0 {
				continue
			}
			if cur, ok := starts[e.Epoch]; !ok || e.StartOffset < cur {
				starts[e.Epoch] = e.StartOffset
			}
		}
	}
	all := make([]checkpoint.EpochEntry, 0, len(starts))
	for e, o := range starts {
		all = append(all, checkpoint.EpochEntry{Epoch: e, StartOffset: o})
	}
	slices.SortFunc(all, func(a, b checkpoint.EpochEntry) int { return cmp.Compare(a.Epoch, b.Epoch) })
	var out []checkpoint.EpochEntry
	for _, e := range all {
		for len(out) > 0 && out[len(out)-1].StartOffset >= e.StartOffset {
			out = out[:len(out)-1]
		}
		out = append(out, e)
	}
	below := 0
	for below < len(out) && out[below].StartOffset <= logStart {
		below++
	}
	if below > 0 {
		out[below-1].StartOffset = logStart
		out = out[below-1:]
	}
	return out
}

// lastTieredStart is KIP-1023 (follower.fetch.last.tiered.offset.enable):
// for a follower of a tiered partition whose local log is empty and
// below the remote end (a new replica, a lost disk), the fetcher may skip
// copying what the remote tier already holds and start after it: it calls
// rebuildFromTierAt(ctx, p, logStart, last) with what this returns (the
// remote tier's start and its last offset, from the image) before its
// first fetch, and fetches from the offset that returns. ok is false when
// the setting is off, the topic is not tiered, the log holds data, or
// nothing is tiered yet: fetch as usual. The cost (KIP-1023's): leading,
// such a replica serves everything below its local start from the tier.
func (n *Node) lastTieredStart(p *partition) (logStart, last int64, ok bool) {
	t := n.tier
	if t == nil || !n.cfg.Tiering.FollowerFetchLastTiered || !p.log.Config().RemoteStorageEnable {
		return -1, -1, false
	}
	start, end, ok := t.remoteRange(p)
	l := p.log
	if !ok || l.LogEndOffset() != l.LocalLogStartOffset() || l.LogEndOffset() > end {
		return -1, -1, false
	}
	return start, end, true
}

// restoreProducers gives a partition restarted empty at next after the
// remote tier (restartEmpty: a lost disk, a restore, an unclean election
// of an empty replica) the producer state uploaded with the remote
// segment ending at next - 1, so idempotent producers keep their
// sequences across the loss. The .snapshot object is fetched on a
// goroutine of the node (reconcile must not wait for the object store);
// it is installed only if nothing was appended meanwhile (the log still
// ends at next), under p.appendMu, and written as <next>.snapshot so a
// restart finds it; else the state built from those appends stays and a
// warning says the earlier producers' state is lost.
func (t *tier) restoreProducers(p *partition, next int64) {
	n := t.n
	var seg metadata.RemoteSegmentInfo
	var ok bool
	n.view(func(st *metadata.State) { seg, _, ok = st.FinishedRemoteSegmentAt(p.topicID, p.index, next-1) })
	if !ok || seg.EndOffset != next-1 {
		return
	}
	n.loops.Add(1)
	go func() {
		defer n.loops.Done()
		snap, err := t.fetchSnapshot(n.ctx, tiering.FromInfo(p.topic, seg))
		if err != nil {
			n.logger.Warn("broker: producer snapshot of the remote tier unreadable; idempotent producers start over",
				"topic", p.topic, "partition", p.index, "segment", seg.SegmentID, "err", err)
			return
		}
		if len(snap) == 0 {
			return
		}
		st := producer.New(producer.Options{})
		if err := st.Restore(snap); err != nil {
			n.logger.Warn("broker: producer snapshot of the remote tier corrupt; idempotent producers start over",
				"topic", p.topic, "partition", p.index, "segment", seg.SegmentID, "err", err)
			return
		}
		p.appendMu.Lock()
		defer p.appendMu.Unlock()
		if p.log.LogEndOffset() != next {
			n.logger.Warn("broker: records appended before the remote tier's producer snapshot arrived; the earlier producers' state is lost",
				"topic", p.topic, "partition", p.index, "restarted_at", next, "log_end", p.log.LogEndOffset())
			return
		}
		c := p.prod
		c.mu.Lock()
		c.st, c.lastExpiryMs = st, time.Now().UnixMilli()
		c.mu.Unlock()
		if err := p.log.SnapshotProducers(); err != nil {
			n.logger.Warn("broker: producer snapshot not written after restoring it from the remote tier", "topic", p.topic, "partition", p.index, "err", err)
		}
		n.logger.Info("broker: producer state restored from the remote tier", "topic", p.topic, "partition", p.index,
			"producers", st.Producers(), "at", next)
	}()
}
