package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/checkpoint"
	"github.com/strata-io/strata/tiering/objstore"
)

var (
	// errSegmentVanished: a sealed segment's file is gone because
	// retention.ms deleted it (it now lies below the log start): skipped,
	// not retried.
	errSegmentVanished = errors.New("tiering: segment deleted locally before upload")
	// errAckMismatch: a create-only Put answered precondition-failed (a
	// retry after a lost acknowledgement) but the object there is not the
	// size we put: not ours to trust, so the copy restarts under a new id.
	errAckMismatch = errors.New("tiering: existing object does not match the upload")
	// errSuperseded: the segment being copied is no longer COPY_STARTED
	// in the image: a newer leader (another broker) took it for an
	// orphan and deleted it while this broker, not yet told it lost the
	// leadership, was still putting its objects. The copy stops before
	// the manifest: the newer leader owns the partition's manifest now.
	// Not retried; the objects put meanwhile are orphans the newer
	// leader's orphan-object scan deletes.
	errSuperseded = errors.New("tiering: copy superseded: the segment is no longer COPY_STARTED")
	// errFenced: the controller refused a commit because this broker is
	// no longer the partition's leader in the epoch it acts under
	// (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER): a zombie, deposed
	// while paused or cut off from the metadata stream. Not retried; the
	// partition's task stops until the broker hears of the change. A copy
	// refused at COPY_FINISHED discards what it put (discardFenced).
	errFenced = errors.New("tiering: fenced: not the partition's leader in this epoch")
)

// maxCopyRestarts bounds how often one segment's copy restarts under a
// new id after errAckMismatch within one pass.
const maxCopyRestarts = 3

// copyNext runs a copy action (PlanCopy's choice) on a slot of the
// copier pool, restarting under a new id after errAckMismatch. It reports
// whether the segment is done with: copied, or deleted locally meanwhile
// (below the log start now; the next plan skips it).
func (u *Uploader) copyNext(ctx context.Context, lp LeaderPartition, a Action, epoch int32) (bool, error) {
	select {
	case u.slots <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-u.slots }()
	for restart := 0; ; restart++ {
		err := u.copySegment(ctx, lp, a.Segment, epoch)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, errSegmentVanished):
			return true, nil
		case errors.Is(err, errAckMismatch) && restart < maxCopyRestarts:
			continue
		}
		return false, err
	}
}

// localFile is one object of a segment to upload, or one section of its
// packed .meta: read from r (nil for an absent producer snapshot: empty)
// or data, and its size.
type localFile struct {
	ext  string
	r    io.ReaderAt
	size int64
	data []byte // for the generated .epochs object
}

// copySegment uploads the sealed segment info under a new segment id (see the package
// comment's lifecycle):
//
//  1. open its files through Log.OpenSealedSegment, a reference that keeps
//     them readable until the copy ends (a segment the log no longer holds,
//     now below the log start, is errSegmentVanished);
//  2. commit COPY_STARTED with the full description;
//  3. put .log and .meta, create-only: the packed object (pack.go) of
//     .index, .timeindex, .snapshot (the producer state at the segment's
//     end: the next segment's snapshot), .epochs, .txnindex (the aborted
//     transactions whose markers the segment holds; empty when none);
//  4. add the segment to the manifest as COPY_FINISHED, unless the
//     segment is no longer COPY_STARTED in the image (errSuperseded: a
//     newer leader took it for an orphan; the manifest is its now) or
//     the controller no longer takes this broker for the leader in epoch
//     (a repeated COPY_STARTED, fenced: errFenced);
//  5. commit COPY_FINISHED, then Log.SetRemoteUploadedOffset(end+1).
//
// A crash or cancellation between 2 and 5 leaves a COPY_STARTED orphan
// that the next plan's orphan step removes; objects are never put before step 2, so
// every object in the bucket is named by some record.
//
// Both commits are made as the leader of epoch, the epoch the partition's
// task was started under: the controller refuses them (errFenced) once
// another broker or a newer epoch leads. Refused at step 2, nothing was
// put; refused at step 4 or 5, discardFenced takes back what steps 3 and 4
// did.
func (u *Uploader) copySegment(ctx context.Context, lp LeaderPartition, info storage.SegmentInfo, epoch int32) error {
	begin := time.Now()
	base, end := info.BaseOffset, info.NextOffset-1
	sealed, err := u.openSegment(lp, info)
	if err != nil {
		return err
	}
	defer sealed.Release()
	epochs := segmentEpochs(lp.Log.LeaderEpochs().Entries(), base, end)
	sections := map[string][]byte{ExtEpochs: encodeEpochs(epochs)}
	for _, f := range []localFile{
		{ext: ExtIndex, r: sealed.Index.R, size: sealed.Index.Size},
		{ext: ExtTimeIndex, r: sealed.TimeIndex.R, size: sealed.TimeIndex.Size},
		{ext: ExtSnapshot, r: sealed.Snapshot.R, size: sealed.Snapshot.Size},
		{ext: ExtTxnIndex, r: sealed.TxnIndex.R, size: sealed.TxnIndex.Size},
	} {
		b, err := readLocalFile(f)
		if err != nil {
			return fmt.Errorf("tiering: copy %s/%d [%d, %d]: read .%s: %w", lp.Topic, lp.Index, base, end, f.ext, err)
		}
		sections[f.ext] = b
	}
	packed := encodePack(sections)
	files := []localFile{
		{ext: ExtLog, r: sealed.Log.R, size: sealed.Log.Size},
		{ext: ExtMeta, size: int64(len(packed)), data: packed},
	}

	id := uuid.New()
	u.setInflight(id, true)
	defer u.setInflight(id, false)
	desc := metadata.RemoteSegmentInfo{
		SegmentID: id, TopicID: lp.TopicID, Partition: lp.Index,
		BaseOffset: base, EndOffset: end, MaxTimestamp: info.MaxTimestamp,
		LeaderEpochs: epochs, SizeBytes: files[0].size,
	}
	if err := u.commit(ctx, desc, metadata.CopyStarted, epoch); err != nil {
		return fmt.Errorf("tiering: copy %s/%d [%d, %d]: %w", lp.Topic, lp.Index, base, end, err)
	}
	rs := RemoteSegment{Partition: lp.Partition, SegmentID: id, BaseOffset: base, EndOffset: end}
	var putBytes int64
	for _, f := range files {
		var body interface {
			io.ReadSeeker
			io.ReaderAt
		}
		switch {
		case f.data != nil:
			body = bytes.NewReader(f.data)
		case f.r == nil:
			body = bytes.NewReader(nil)
		default:
			body = io.NewSectionReader(f.r, 0, f.size)
		}
		if u.bucket != nil {
			body = &throttledReader{ctx: ctx, r: body, b: u.bucket}
		}
		if err := u.putObject(ctx, rs.Key(u.cfg.Prefix, f.ext), body, f.size); err != nil {
			u.abandon(ctx, lp.Topic, desc, err, epoch)
			return fmt.Errorf("tiering: copy %s/%d [%d, %d] %s: %w", lp.Topic, lp.Index, base, end, f.ext, err)
		}
		putBytes += f.size
	}

	seg := Segment{
		SegmentID: id, BaseOffset: base, EndOffset: end, MaxTimestamp: info.MaxTimestamp,
		SizeBytes: files[0].size, LeaderEpochs: toManifestEpochs(epochs), State: StateCopyFinished,
		Files: FileSizes{
			Log: files[0].size, Index: int64(len(sections[ExtIndex])), TimeIndex: int64(len(sections[ExtTimeIndex])),
			Snapshot: int64(len(sections[ExtSnapshot])), Epochs: int64(len(sections[ExtEpochs])),
			TxnIndex: int64(len(sections[ExtTxnIndex])), Meta: files[1].size,
		},
	}
	live := map[uuid.UUID]bool{id: true}
	for _, s := range u.cfg.Meta.RemoteSegments(lp.TopicID, lp.Index) {
		if s.State == metadata.CopyFinished {
			live[s.SegmentID] = true
		}
	}
	key := ManifestKey(u.cfg.Prefix, lp.Topic, lp.TopicID, lp.Index)
	configs := u.cfg.Meta.TopicConfigs(lp.Topic)
	if len(configs) == 0 {
		configs = nil
	}
	// A leader change may have overtaken this copy (see errSuperseded):
	// checked before the manifest is touched, and again inside each
	// conditional write, the last moment before it lands.
	if err := u.stillCopying(lp, id); err != nil {
		return fmt.Errorf("tiering: copy %s/%d [%d, %d]: %w", lp.Topic, lp.Index, base, end, err)
	}
	// The image may be stale (a zombie cut off from the metadata stream
	// sees its copy still COPY_STARTED and none of the new leader's
	// segments: its manifest add would drop them from the manifest). So
	// inside each conditional write, after the image check, the
	// controller is asked too: COPY_STARTED again, a no-op it fences like
	// a change (the fence probe). A zombie paused between that answer and
	// the Put can still get through; closing that needs the manifest to
	// carry the writer's leader epoch (a manifest format version).
	if err := u.retry(ctx, "manifest add", func() error {
		_, err := u.ms.Update(ctx, key, func(m *Manifest) error {
			if err := u.stillCopying(lp, id); err != nil {
				return err
			}
			if err := u.commit(ctx, desc, metadata.CopyStarted, epoch); err != nil {
				return err
			}
			addToManifest(m, lp.Partition, seg, live)
			m.Configs = configs
			return nil
		})
		return err
	}); err != nil {
		switch {
		case errors.Is(err, errFenced):
			u.discardFenced(lp.Partition, desc)
		case !errors.Is(err, errSuperseded):
			u.abandon(ctx, lp.Topic, desc, err, epoch)
		}
		return fmt.Errorf("tiering: copy %s/%d [%d, %d] manifest: %w", lp.Topic, lp.Index, base, end, err)
	}
	if err := u.commit(ctx, desc, metadata.CopyFinished, epoch); err != nil {
		if errors.Is(err, errFenced) {
			u.discardFenced(lp.Partition, desc)
		}
		return fmt.Errorf("tiering: copy %s/%d [%d, %d]: %w", lp.Topic, lp.Index, base, end, err)
	}
	// Only now may local retention delete the segment (invariant 3).
	lp.Log.SetRemoteUploadedOffset(end + 1)
	u.compactManifest(ctx, key)
	u.metrics.uploadedBytes.Add(float64(putBytes))
	u.metrics.uploadedSegments.Inc()
	u.metrics.copySeconds.Observe(time.Since(begin).Seconds())
	u.log.Debug("segment uploaded", "topic", lp.Topic, "partition", lp.Index, "base", base, "end", end, "segment", id, "bytes", putBytes)
	return nil
}

// readLocalFile reads a small local file (an index, the snapshot, the
// transaction index) whole, for the packed object.
func readLocalFile(f localFile) ([]byte, error) {
	if f.r == nil || f.size == 0 {
		return []byte{}, nil
	}
	b := make([]byte, f.size)
	n, err := f.r.ReadAt(b, 0)
	if n == len(b) {
		return b, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
}

// compactManifest folds the manifest's chunks into its base once
// CompactAfter of them piled up (manifest_chunks.go), after the change
// that made it due is committed: never on the way of a copy. Best effort:
// a failure leaves chunks, which readers apply, for the next time.
func (u *Uploader) compactManifest(ctx context.Context, key string) {
	if !u.ms.CompactionDue(key) {
		return
	}
	if _, err := u.ms.Compact(ctx, key); err != nil && ctx.Err() == nil {
		u.log.Warn("manifest compaction", "manifest", key, "err", err)
	}
}

// stillCopying returns errSuperseded unless segment id of lp is
// COPY_STARTED in this broker's metadata image.
func (u *Uploader) stillCopying(lp LeaderPartition, id uuid.UUID) error {
	for _, s := range u.cfg.Meta.RemoteSegments(lp.TopicID, lp.Index) {
		if s.SegmentID == id {
			if s.State == metadata.CopyStarted {
				return nil
			}
			break
		}
	}
	return errSuperseded
}

// abandon cleans up a copy that failed for good after COPY_STARTED
// (a mismatched object after a lost ack): the segment goes through the
// delete path now rather than waiting for the orphan grace. Best effort:
// whatever fails here is an orphan deleteOrphans finds later.
func (u *Uploader) abandon(ctx context.Context, topic string, desc metadata.RemoteSegmentInfo, cause error, epoch int32) {
	if ctx.Err() != nil || !permanent(cause) {
		return
	}
	if u.deleteSegments(ctx, topic, []metadata.RemoteSegmentInfo{desc}, true, -1, epoch) == nil {
		u.metrics.orphans.Inc()
	}
}

// discardFenced takes back a copy whose COPY_FINISHED the controller
// refused (errFenced): its entry leaves the manifest (only its own: the
// rest of the manifest is the new leader's now) and its objects are
// deleted. No DELETE_STARTED first, unlike every other deletion: the
// controller would refuse it too, and none is needed, since readers read
// only COPY_FINISHED segments and this one never was (a repeat of a
// committed COPY_FINISHED, whose acknowledgement was lost, succeeds
// rather than being fenced, so a fenced answer means it was not
// committed). Its COPY_STARTED record stays: another broker's, so the new
// leader deletes it as an orphan at once, finding its objects gone (fine:
// Delete is idempotent). Best effort under a short deadline of its own
// (the task's context may be ending); whatever is left is the new
// leader's orphan-object scan's.
func (u *Uploader) discardFenced(p Partition, desc metadata.RemoteSegmentInfo) {
	ctx, cancel := context.WithTimeout(u.ctx, discardTimeout)
	defer cancel()
	segs := []metadata.RemoteSegmentInfo{desc}
	if err := u.dropFromManifest(ctx, p, segs, -1); err != nil {
		u.log.Warn("fenced copy: drop from manifest", "topic", p.Topic, "partition", p.Index, "segment", desc.SegmentID, "err", err)
	}
	if err := u.deleteObjects(ctx, p.Topic, segs); err != nil {
		u.log.Warn("fenced copy: delete objects", "topic", p.Topic, "partition", p.Index, "segment", desc.SegmentID, "err", err)
		return
	}
	u.metrics.orphans.Inc()
	u.log.Info("fenced copy discarded", "topic", p.Topic, "partition", p.Index, "segment", desc.SegmentID)
}

// discardTimeout bounds discardFenced.
const discardTimeout = 30 * time.Second

// openSegment opens info's .log, .index and .timeindex and the producer
// snapshot at its end (the next segment's; none: a zero-byte object)
// through the log's reference-counted call. Called before anything is
// committed.
func (u *Uploader) openSegment(lp LeaderPartition, info storage.SegmentInfo) (*storage.SealedSegment, error) {
	sealed, err := lp.Log.OpenSealedSegment(info.BaseOffset)
	if err != nil {
		if errors.Is(err, storage.ErrNoSuchSegment) && info.NextOffset <= lp.Log.LogStartOffset() {
			return nil, fmt.Errorf("%w: %w", errSegmentVanished, err)
		}
		return nil, fmt.Errorf("tiering: open segment %d: %w", info.BaseOffset, err)
	}
	return sealed, nil
}

// putObject puts one segment object create-only, retrying transient
// failures. ErrPreconditionFailed means the key is taken: keys carry a
// fresh uuid, so only our own earlier attempt (whose acknowledgement was
// lost) can hold it; it counts as done if Head shows the size we put,
// otherwise errAckMismatch.
func (u *Uploader) putObject(ctx context.Context, key string, body io.ReadSeeker, size int64) error {
	return u.retry(ctx, "put "+key, func() error {
		if _, err := body.Seek(0, io.SeekStart); err != nil {
			return err
		}
		_, err := u.cfg.Store.Put(ctx, key, body, size, objstore.PutOptions{Mode: objstore.CreateOnly})
		if !errors.Is(err, objstore.ErrPreconditionFailed) {
			return err
		}
		info, herr := u.cfg.Store.Head(ctx, key)
		if herr != nil {
			return herr
		}
		if info.Size != size {
			return fmt.Errorf("%w: %s is %d bytes, put %d", errAckMismatch, key, info.Size, size)
		}
		return nil
	})
}

// addToManifest adds seg to m (idempotent). It also reconciles m with the
// controller: segments not COPY_FINISHED there (live) are dropped (a crash
// between the manifest write and COPY_FINISHED leaves such an entry; its
// segment is an orphan), and so are segments seg covers wholly (a new
// leader's larger segment), keeping end offsets strictly rising as
// Validate requires.
func addToManifest(m *Manifest, p Partition, seg Segment, live map[uuid.UUID]bool) {
	m.Topic, m.TopicID, m.Partition = p.Topic, p.TopicID, p.Index
	if m.Find(seg.SegmentID) >= 0 {
		return
	}
	out := make([]Segment, 0, len(m.Segments)+1)
	for _, s := range m.Segments {
		if !live[s.SegmentID] || (s.BaseOffset >= seg.BaseOffset && s.EndOffset <= seg.EndOffset) {
			continue
		}
		out = append(out, s)
	}
	out = append(out, seg)
	slices.SortFunc(out, func(a, b Segment) int {
		if a.BaseOffset != b.BaseOffset {
			return cmpInt64(a.BaseOffset, b.BaseOffset)
		}
		return cmpInt64(a.EndOffset, b.EndOffset)
	})
	// Drop any segment a later one covers (same base, larger end) or that
	// ends no later than its predecessor.
	kept := out[:0]
	for _, s := range out {
		for len(kept) > 0 && kept[len(kept)-1].BaseOffset == s.BaseOffset {
			kept = kept[:len(kept)-1]
		}
		if len(kept) > 0 && s.EndOffset <= kept[len(kept)-1].EndOffset {
			continue
		}
		kept = append(kept, s)
	}
	m.Segments = kept
	if len(kept) > 0 && m.LogStartOffset < kept[0].BaseOffset {
		m.LogStartOffset = kept[0].BaseOffset
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// segmentEpochs returns the leader-epoch entries covering [base, end]: the
// entry in force at base (or the first entry, if none began at or before
// base), its start clamped to base, then every entry starting in
// (base, end].
func segmentEpochs(entries []checkpoint.EpochEntry, base, end int64) []metadata.EpochStart {
	first := -1
	for j, e := range entries {
		if e.StartOffset <= base {
			first = j
		}
	}
	if first < 0 && len(entries) > 0 {
		first = 0
	}
	if first < 0 {
		return nil
	}
	var out []metadata.EpochStart
	for _, e := range entries[first:] {
		if e.StartOffset > end {
			break
		}
		out = append(out, metadata.EpochStart{Epoch: e.Epoch, StartOffset: max(e.StartOffset, base)})
	}
	return out
}

func toManifestEpochs(es []metadata.EpochStart) []EpochEntry {
	out := make([]EpochEntry, len(es))
	for i, e := range es {
		out[i] = EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	return out
}

// encodeEpochs writes entries in the leader-epoch-checkpoint text format
// (see the .epochs section of uploader.go's comment).
func encodeEpochs(es []metadata.EpochStart) []byte {
	var b strings.Builder
	b.WriteString("0\n")
	b.WriteString(strconv.Itoa(len(es)))
	b.WriteByte('\n')
	for _, e := range es {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return []byte(b.String())
}

// DecodeEpochs parses an .epochs object (see [encodeEpochs]'s format):
// version 0, a count, then that many "<epoch> <start offset>" lines with
// rising epochs and start offsets.
func DecodeEpochs(data []byte) ([]EpochEntry, error) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	bad := func(why string) ([]EpochEntry, error) {
		return nil, fmt.Errorf("tiering: bad .epochs object: %s", why)
	}
	if len(lines) < 2 || lines[0] != "0" {
		return bad("version")
	}
	n, err := strconv.Atoi(lines[1])
	if err != nil || n < 0 || n != len(lines)-2 {
		return bad("count")
	}
	out := make([]EpochEntry, 0, n)
	for _, l := range lines[2:] {
		var e EpochEntry
		f := strings.Fields(l)
		if len(f) != 2 {
			return bad("line " + strconv.Quote(l))
		}
		ep, err1 := strconv.ParseInt(f[0], 10, 32)
		so, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || ep < 0 || so < 0 {
			return bad("line " + strconv.Quote(l))
		}
		e.Epoch, e.StartOffset = int32(ep), so
		if len(out) > 0 && (e.Epoch <= out[len(out)-1].Epoch || e.StartOffset < out[len(out)-1].StartOffset) {
			return bad("entries not rising")
		}
		out = append(out, e)
	}
	return out, nil
}

// throttleChunk is the most one Read takes from the bucket at once.
const throttleChunk = 64 << 10

// throttledReader paces reads of an upload body through the uploader's
// token bucket (budget.go's, as remote reads use: one second of burst,
// then remote.log.manager.copy.max.bytes.per.second); it stays seekable so
// a retried Put can rewind it, and a ReaderAt so the S3 store reads its
// multipart parts in place (a plain reader costs it one part buffer per
// concurrent part: a GiB with 256 MiB parts).
type throttledReader struct {
	ctx context.Context
	r   interface {
		io.ReadSeeker
		io.ReaderAt
	}
	b *tokenBucket
}

func (t *throttledReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		q := p[n:min(len(p), n+throttleChunk)]
		if err := t.b.wait(t.ctx, int64(len(q))); err != nil {
			return n, err
		}
		m, err := t.r.ReadAt(q, off+int64(n))
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (t *throttledReader) Read(p []byte) (int, error) {
	if len(p) > throttleChunk {
		p = p[:throttleChunk]
	}
	if err := t.b.wait(t.ctx, int64(len(p))); err != nil {
		return 0, err
	}
	return t.r.Read(p)
}

func (t *throttledReader) Seek(off int64, whence int) (int64, error) { return t.r.Seek(off, whence) }
