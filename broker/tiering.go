package broker

// The node's remote tier (issue 6): the tiering uploader and reader built
// over the object store tiering_store.go opens, fed from reconcile with the
// partitions this broker leads with remote.storage.enable=true, and asked
// by Fetch and ListOffsets for offsets below a partition's local log
// start.
//
// A fetch's remote read is tiering.Reader.Fetch: coalesced per partition
// and offset, waited for up to remote.fetch.max.wait.ms, going on in the
// background past it to warm the chunk cache (tiering/reader_fetch.go).
// Many partitions of one fetch are read at once.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/tiering"
)

// tier is the node's remote tier; nil when remote.log.storage.system.enable
// is false.
type tier struct {
	n  *Node
	up *tiering.Uploader
	rd *tiering.Reader

	// ready is set once the node's metadata has caught up at start: the
	// uploader must not see a partition while the log is replayed (remote
	// segments still missing from the image would look deleted, and a log
	// start not yet lowered to the remote start would expire them).
	ready atomic.Bool

	mu        sync.Mutex
	led       map[tpKey]int32 // partitions handed to the uploader, by leader epoch
	restoring map[string]int  // topics being restored: not handed to the uploader yet
	// followed are the remote-storage partitions this broker replicates
	// without leading: their remote-uploaded offset follows the
	// controller's COPY_FINISHED records (replica_tier.go).
	followed map[tpKey]bool
	// rebuilds counts replicas rebuilt from the remote tier
	// (rebuildFromTierAt).
	rebuilds atomic.Uint64
}

// startTier builds the uploader and reader once the controller service is
// known (the uploader commits segment states through it) and before the
// metadata follower starts (reconcile hands partitions to the uploader).
func (n *Node) startTier() error {
	if n.remote == nil {
		return nil
	}
	ts := n.cfg.Tiering
	t := &tier{n: n, led: map[tpKey]int32{}, restoring: map[string]int{}, followed: map[tpKey]bool{}}
	up, err := tiering.NewUploader(tiering.UploaderConfig{
		Store: n.remote, Prefix: "", Meta: tierMeta{n}, BrokerID: n.cfg.NodeID,
		Threads: ts.CopierThreads, Interval: ts.TaskInterval, CopyMaxBytesPerSecond: ts.CopyMaxBytesPerSecond,
		OrphanGrace: ts.OrphanGrace, Registerer: n.reg, Logger: n.logger,
		RetryBackoff: n.cfg.RemoteStore.Retry.BaseDelay, RetryBackoffMax: n.cfg.RemoteStore.Retry.MaxDelay,
	})
	if err != nil {
		return fmt.Errorf("broker: remote tier uploader: %w", err)
	}
	rd, err := tiering.NewReader(tiering.ReaderConfig{
		Store: n.remote, Prefix: "", CacheDir: ts.CacheDir, CacheBytes: ts.CacheBytes, ChunkBytes: ts.ChunkBytes,
		IndexCacheBytes: ts.IndexCacheBytes, Threads: ts.ReaderThreads, MaxBytesPerSecond: ts.FetchMaxBytesPerSecond,
		ReadAheadChunks: readAhead(ts.ReadAheadChunks), FetchTimeout: n.cfg.RemoteStore.RequestTimeout,
		Next: t.nextRemote, Registerer: n.reg, Logger: n.logger,
	})
	if err != nil {
		up.Close()
		return fmt.Errorf("broker: remote tier reader: %w", err)
	}
	t.up, t.rd = up, rd
	n.tier = t
	up.Start()
	return nil
}

// readAhead maps remote.log.reader.readahead.chunks (0 = off) to the
// reader's setting (0 = its default, < 0 = off).
func readAhead(chunks int) int {
	if chunks == 0 {
		return -1
	}
	return chunks
}

// closeTier stops the uploader (in-flight copies are abandoned; they
// become orphans the next leader cleans) and the reader.
func (t *tier) close() error {
	if t == nil {
		return nil
	}
	return errors.Join(t.up.Close(), t.rd.Close())
}

// track tells the uploader whether this broker leads p with remote storage
// on. Called by reconcile after every metadata change; the uploader hears
// only of changes. A led partition whose local log is empty while the
// remote tier holds data (a new disk, a restore) restarts after the remote
// end first.
func (t *tier) track(p *partition, leader, remote bool) {
	if t == nil || !t.ready.Load() {
		return
	}
	if remote {
		// Every replica of a tiered partition keeps the producer snapshots
		// of the segments not uploaded yet (storage keeps those above the
		// remote-uploaded offset): the leader uploads each segment with the
		// snapshot at its end, and a follower may lead and upload next. At
		// -1 (no uploader runs for the log) storage keeps only the last
		// two, and every segment rolled before the first upload went up
		// with an empty .snapshot; 0 says "nothing uploaded yet".
		p.log.SetRemoteUploadedOffset(0)
	}
	k := tpKey{p.topic, p.index}
	epoch := p.leaderEpoch.Load()
	t.mu.Lock()
	follow := !leader && remote
	newFollower := follow && !t.followed[k]
	if follow {
		t.followed[k] = true
	} else {
		delete(t.followed, k)
	}
	prev, had := t.led[k]
	// A topic being restored is not led by the uploader until every
	// segment of its manifests is registered: its orphan scan would take
	// the objects of segments not registered yet for orphans.
	lead := leader && remote && t.restoring[p.topic] == 0
	switch {
	case lead && (!had || prev != epoch):
		t.led[k] = epoch
	case !lead && had:
		delete(t.led, k)
	default:
		t.mu.Unlock()
		if newFollower {
			t.followUploaded(p)
		}
		return
	}
	t.mu.Unlock()
	part := tiering.Partition{Topic: p.topic, TopicID: p.topicID, Index: p.index}
	if !lead {
		t.up.Resign(part)
		if newFollower {
			t.followUploaded(p)
		}
		return
	}
	if err := t.restartEmpty(p); err != nil {
		t.n.logger.Error("broker: restart empty log after the remote tier", "topic", p.topic, "partition", p.index, "err", err)
	}
	t.up.Lead(tiering.LeaderPartition{
		Partition: part, Log: p.log,
		HighWatermark: p.copyBound, LeaderEpoch: p.leaderEpoch.Load,
	})
}

// copyBound is how far the uploader may copy: segments wholly below the
// high watermark, the recovery point and the last stable offset (Kafka's RemoteLogManager
// copies below the LSO), so the tier never holds an open transaction's
// batches or a marker the ISR may still lose.
func (p *partition) copyBound() int64 {
	// And below the recovery point: a rolled segment is fsynced, and its
	// end's producer snapshot written, in the background (storage's
	// rollSync); a segment copied before that could outlive a crash that
	// cut it locally, and the tier would hold records the log then
	// rewrote.
	return min(p.hw.Load(), p.log.LastStableOffset(), p.log.RecoveryPoint())
}

// abortedTxns is storage.Log.AbortedTxns over both tiers, for a
// read_committed fetch of [from, to) read from the remote tier: the
// entries of the remote segments' .txnindex objects from the one holding
// from on (below the local log start), until one has an entry whose last
// stable offset is at or above to (as Kafka's
// collectAbortedTransactions), then the local log's.
func (t *tier) abortedTxns(ctx context.Context, p *partition, from, to int64) ([]storage.AbortedTxn, error) {
	if to <= from {
		return nil, nil
	}
	var out []storage.AbortedTxn
	local := p.log.LocalLogStartOffset()
	for _, s := range t.finished(p.topicID, p.index) {
		if s.EndOffset < from {
			continue
		}
		if s.BaseOffset >= local {
			break
		}
		entries, err := t.rd.AbortedTxns(ctx, tiering.FromInfo(p.topic, s))
		if err != nil {
			return nil, fmt.Errorf("%w: remote transaction index: %v", kerr.KafkaStorageError, err)
		}
		complete := false
		for _, a := range entries {
			if a.LastOffset >= from && a.FirstOffset < to {
				out = append(out, a)
			}
			complete = complete || a.LastStableOffset >= to
		}
		if complete {
			return out, nil
		}
	}
	return append(out, p.log.AbortedTxns(from, to)...), nil
}

// start hands the uploader the partitions reconcile opened while the
// metadata was replayed, now that it has caught up.
func (t *tier) start() {
	if t == nil {
		return
	}
	t.ready.Store(true)
	t.n.partsMu.RLock()
	ps := make([]*partition, 0, len(t.n.parts))
	for _, p := range t.n.parts {
		ps = append(ps, p)
	}
	t.n.partsMu.RUnlock()
	for _, p := range ps {
		t.track(p, p.leader.Load(), p.log.Config().RemoteStorageEnable)
	}
}

// untrack forgets a partition this node stops hosting.
func (t *tier) untrack(p *partition) {
	if t == nil {
		return
	}
	t.mu.Lock()
	_, had := t.led[tpKey{p.topic, p.index}]
	delete(t.led, tpKey{p.topic, p.index})
	delete(t.followed, tpKey{p.topic, p.index})
	t.mu.Unlock()
	if had {
		t.up.Resign(tiering.Partition{Topic: p.topic, TopicID: p.topicID, Index: p.index})
	}
}

// finished returns the partition's COPY_FINISHED segments, oldest first.
func (t *tier) finished(topicID uuid.UUID, index int32) []metadata.RemoteSegmentInfo {
	var segs []metadata.RemoteSegmentInfo
	t.n.view(func(st *metadata.State) { segs = st.RemoteSegments(topicID, index) })
	out := segs[:0]
	for _, s := range segs {
		if s.State == metadata.CopyFinished {
			out = append(out, s)
		}
	}
	return out
}

// remoteRange returns the first and last offsets the remote tier holds of
// the partition (ok false when it holds nothing).
func (t *tier) remoteRange(p *partition) (start, end int64, ok bool) {
	segs := t.finished(p.topicID, p.index)
	if len(segs) == 0 {
		return -1, -1, false
	}
	start, end = segs[0].BaseOffset, segs[0].EndOffset
	for _, s := range segs[1:] {
		start, end = min(start, s.BaseOffset), max(end, s.EndOffset)
	}
	return start, end, true
}

// restartEmpty restarts an empty local log after the remote tier's end,
// with the remote start as log start: the partition then serves its old
// data from the bucket and appends after it. A log with data is left
// alone.
//
// When the log's directory vanished while the node was down (storage's
// recovery-point checkpoint still listed it), what the checkpoint says
// had been written locally, up to the recovery point, is compared with
// the remote end: offsets above the remote end were never uploaded and
// are gone, and a warning says which. The recovery point is a lower
// bound (records after the last checkpoint are not counted), so the loss
// may reach further.
func (t *tier) restartEmpty(p *partition) error {
	lostTo, vanished := t.n.store.Vanished(p.topic, p.index) // next offset the lost log had flushed
	start, end, ok := t.remoteRange(p)
	if !ok {
		if vanished && lostTo > 0 {
			t.n.logger.Warn("broker: local log of a tiered partition vanished with nothing in the remote tier: records lost",
				"topic", p.topic, "partition", p.index, "lost_from", 0, "lost_to", lostTo-1)
		}
		return nil
	}
	l := p.log
	if l.LogEndOffset() != l.LocalLogStartOffset() || l.LogEndOffset() > end {
		return nil
	}
	// The leader-epoch history comes with the data (what the remote
	// segments record), and the leader's own epoch starts at the new end
	// (KIP-279: written before any append, so OffsetsForLeaderEpoch from
	// followers is answered from the first moment).
	epochs := rebuildEpochs(t.finished(p.topicID, p.index), start, end+1)
	if p.leader.Load() {
		if e := p.leaderEpoch.Load(); e >= 0 && (len(epochs) == 0 || e > epochs[len(epochs)-1].Epoch) {
			epochs = append(epochs, checkpoint.EpochEntry{Epoch: e, StartOffset: end + 1})
		}
	}
	if err := l.RestartFromTier(start, end+1, epochs, nil); err != nil {
		return err
	}
	t.restoreProducers(p, end+1) // replica_tier.go: the producer snapshot, off this path
	l.SetRemoteUploadedOffset(end + 1)
	p.raiseHW(end + 1)
	switch {
	case vanished && lostTo > end+1:
		t.n.logger.Warn("broker: local log of a tiered partition vanished; records never uploaded are lost, the partition restarts after the remote tier",
			"topic", p.topic, "partition", p.index, "lost_from", end+1, "lost_to", lostTo-1, "lost_records", lostTo-end-1,
			"remote_start", start, "remote_end", end, "lost_to_source", "recovery-point checkpoint (a lower bound)")
	case vanished:
		t.n.logger.Warn("broker: local log of a tiered partition vanished; the remote tier holds everything it had flushed, the partition restarts after it",
			"topic", p.topic, "partition", p.index, "remote_start", start, "remote_end", end, "checkpointed_end", lostTo)
	default:
		t.n.logger.Info("broker: empty log restarted after the remote tier", "topic", p.topic, "partition", p.index,
			"log_start", start, "log_end", end+1)
	}
	return nil
}

// segmentFor returns the COPY_FINISHED segment holding offset: the one
// with the greatest base offset at or below it that reaches it; and the
// segment right after it when there is one (nil otherwise).
func (t *tier) segmentFor(p *partition, offset int64) (tiering.RemoteSegment, *tiering.RemoteSegment, bool) {
	var seg metadata.RemoteSegmentInfo
	var next *metadata.RemoteSegmentInfo
	var ok bool
	t.n.view(func(st *metadata.State) { seg, next, ok = st.FinishedRemoteSegmentAt(p.topicID, p.index, offset) })
	if !ok {
		return tiering.RemoteSegment{}, nil, false
	}
	var nx *tiering.RemoteSegment
	if next != nil {
		n := tiering.FromInfo(p.topic, *next)
		nx = &n
	}
	return tiering.FromInfo(p.topic, seg), nx, true
}

// nextRemote is the reader's ReaderConfig.Next: the remote segment after
// seg, when the consumer will read it from the remote tier (below the
// local log start), so read-ahead over small segments goes on past the
// one [tier.read] named with Follows.
func (t *tier) nextRemote(seg tiering.RemoteSegment) (tiering.RemoteSegment, bool) {
	p := t.n.partition(seg.Topic, seg.Index)
	if p == nil || p.topicID != seg.TopicID {
		return tiering.RemoteSegment{}, false
	}
	_, next, ok := t.segmentFor(p, seg.EndOffset)
	if !ok || next == nil || next.BaseOffset >= p.log.LocalLogStartOffset() {
		return tiering.RemoteSegment{}, false
	}
	return *next, true
}

// servesRemote reports whether a fetch at offset reads the remote tier.
func (t *tier) servesRemote(p *partition, offset int64) bool {
	// Cheapest first: a tail fetch (at or above the local start) stops at
	// one atomic load, before the config is copied.
	return t != nil && offset < p.log.LocalLogStartOffset() && offset >= p.log.LogStartOffset() &&
		p.log.Config().RemoteStorageEnable
}

// maxRemoteSegmentsPerRead bounds the remote segments one partition's
// read goes through (each adds at least one batch or ends the read).
const maxRemoteSegmentsPerRead = 64

// read starts (or joins) the remote read of p at offset and waits for it
// up to wait (tiering.Reader.Fetch). timedOut reports a read still in the
// air. A read that reaches the end of its segment with bytes to spare
// goes on into the following remote segments, within maxBytes (only the
// first batch of the first may exceed it, KIP-74) and what is left of the
// wait: a catch-up consumer is not held to one segment per fetch. The
// view holds the chunks in the reader's cache until it is released; its
// file regions are sendfile(2)d like a local segment's.
func (t *tier) read(ctx context.Context, p *partition, offset int64, maxBytes int, wait time.Duration) (v storage.ReadView, timedOut bool, err error) {
	deadline := time.Now().Add(wait)
	var out tiering.RemoteView
	for i := 0; i < maxRemoteSegmentsPerRead; i++ {
		seg, next, ok := t.segmentFor(p, offset)
		if !ok {
			if i == 0 {
				return storage.ReadView{}, false, fmt.Errorf("%w: offset %d is in no remote segment", storage.ErrOffsetOutOfRange, offset)
			}
			break
		}
		local := p.log.LocalLogStartOffset()
		if next != nil && next.BaseOffset < local {
			// A sequential reader's read-ahead goes on into the next remote
			// segment instead of stalling at every segment boundary.
			t.rd.Follows(seg, *next)
		}
		left := maxBytes - int(out.Size)
		w := wait
		if i > 0 {
			w = max(time.Until(deadline), time.Millisecond)
		}
		res, pending, err := t.rd.Fetch(ctx, seg, offset, left, w)
		switch {
		case i > 0 && (pending || err != nil):
			// What was read so far is the answer; this read goes on (or
			// fails again) on the next fetch.
		case pending:
			return storage.ReadView{}, true, nil
		case err != nil:
			return storage.ReadView{}, false, fmt.Errorf("%w: remote read: %v", kerr.KafkaStorageError, err)
		case i > 0 && res.Size > int64(left):
			res.Release() // a first batch that does not fit next to the others
		default:
			out = tiering.ConcatViews(out, res)
			offset = res.NextOffset
			if offset > seg.EndOffset && next != nil && next.BaseOffset < local && out.Size < int64(maxBytes)-batchHeaderSize {
				continue
			}
		}
		break
	}
	if out.Size == 0 {
		out.Release()
		return storage.ReadView{FirstOffset: offset, NextOffset: offset}, false, nil
	}
	return storage.ExternalView(out.File(), out.Size, out.FirstOffset, out.NextOffset, out.Release), false, nil
}

// batchHeaderSize is a record batch's header: a read with fewer bytes left
// cannot add a batch.
const batchHeaderSize = 61

// offsetForTimestamp looks ts up in the remote tier: the first offset whose
// timestamp is >= ts among segments below the local log start. ok false
// means the answer is on local disk (or nowhere).
func (t *tier) offsetForTimestamp(ctx context.Context, p *partition, ts int64) (off, rts int64, epoch int32, ok bool, err error) {
	if t == nil || !p.log.Config().RemoteStorageEnable {
		return -1, -1, -1, false, nil
	}
	local := p.log.LocalLogStartOffset()
	start := p.log.LogStartOffset()
	for _, s := range t.finished(p.topicID, p.index) {
		if s.EndOffset < start || s.MaxTimestamp < ts {
			continue
		}
		if s.BaseOffset >= local {
			return -1, -1, -1, false, nil // local disk has it
		}
		o, rt, found, err := t.rd.OffsetForTimestamp(ctx, tiering.FromInfo(p.topic, s), ts)
		if err != nil {
			return -1, -1, -1, false, fmt.Errorf("%w: remote timestamp lookup: %v", kerr.KafkaStorageError, err)
		}
		if found && o >= start {
			return o, rt, segmentEpoch(s, o), true, nil
		}
	}
	return -1, -1, -1, false, nil
}

// maxTimestamp returns the remote record with the largest timestamp when
// it beats localMax (ok false otherwise).
func (t *tier) maxTimestamp(ctx context.Context, p *partition, localMax int64) (off, rts int64, ok bool, err error) {
	if t == nil || !p.log.Config().RemoteStorageEnable {
		return -1, -1, false, nil
	}
	var best metadata.RemoteSegmentInfo
	found := false
	start := p.log.LogStartOffset()
	for _, s := range t.finished(p.topicID, p.index) {
		if s.EndOffset >= start && s.MaxTimestamp > localMax && (!found || s.MaxTimestamp > best.MaxTimestamp) {
			best, found = s, true
		}
	}
	if !found {
		return -1, -1, false, nil
	}
	o, rt, ok, err := t.rd.OffsetForTimestamp(ctx, tiering.FromInfo(p.topic, best), best.MaxTimestamp)
	if err != nil {
		return -1, -1, false, fmt.Errorf("%w: remote timestamp lookup: %v", kerr.KafkaStorageError, err)
	}
	return o, rt, ok, nil
}

// latestTiered is the last offset in the remote tier, -1 when none
// (ListOffsets -5, KIP-1005).
func (t *tier) latestTiered(p *partition) int64 {
	if t == nil {
		return -1
	}
	_, end, ok := t.remoteRange(p)
	if !ok {
		return -1
	}
	return end
}

// segmentEpoch is the leader epoch that wrote offset off of segment s.
func segmentEpoch(s metadata.RemoteSegmentInfo, off int64) int32 {
	e := int32(-1)
	for _, ent := range s.LeaderEpochs {
		if ent.StartOffset > off {
			break
		}
		e = ent.Epoch
	}
	return e
}

// tierMeta is the tiering layer's view of the controller (tiering.Metadata)
// through this node: reads from the node's metadata replica, writes
// through the controller service.
type tierMeta struct{ n *Node }

func (m tierMeta) RemoteSegments(topicID uuid.UUID, partition int32) []metadata.RemoteSegmentInfo {
	var out []metadata.RemoteSegmentInfo
	m.n.view(func(st *metadata.State) { out = st.RemoteSegments(topicID, partition) })
	return out
}

func (m tierMeta) RemotePartitions() []metadata.TopicPartition {
	var out []metadata.TopicPartition
	m.n.view(func(st *metadata.State) { out = st.RemotePartitions() })
	return out
}

func (m tierMeta) TopicName(id uuid.UUID) (name string, exists, known bool) {
	m.n.view(func(st *metadata.State) { name, exists, known = st.TopicNameByID(id) })
	return name, exists, known
}

func (m tierMeta) TopicConfigs(name string) map[string]string {
	var out map[string]string
	m.n.view(func(st *metadata.State) { out = st.TopicConfig(name) })
	return out
}

// CommitRemoteSegment commits rec and waits until this node's metadata
// view shows it, so RemoteSegments reflects it on return.
func (m tierMeta) CommitRemoteSegment(ctx context.Context, rec metadata.RemoteSegmentRecord) error {
	if err := m.n.svc.CommitRemoteSegment(ctx, rec); err != nil {
		return err
	}
	if !m.n.waitMetadata(ctx, func(st *metadata.State) bool {
		for _, s := range st.RemoteSegments(rec.TopicID, rec.Partition) {
			if s.SegmentID == rec.SegmentID {
				return s.State >= rec.State
			}
		}
		return rec.State == metadata.DeleteFinished
	}) {
		return fmt.Errorf("broker: waiting for segment %s to show %s: %w", rec.SegmentID, rec.State, ctx.Err())
	}
	return nil
}

// Janitor: the live broker with the lowest id deletes deleted topics'
// remote data.
func (m tierMeta) Janitor() bool {
	lowest := int32(-1)
	m.n.view(func(st *metadata.State) {
		for _, b := range st.Brokers() {
			if !b.Fenced && (lowest < 0 || b.ID < lowest) {
				lowest = b.ID
			}
		}
	})
	return lowest == m.n.cfg.NodeID
}
