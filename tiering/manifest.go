package tiering

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/tiering/objstore"
)

// The manifest is one JSON object per partition, at [ManifestKey]. It
// names every remote segment of the partition, so a partition can be
// rebuilt from the bucket alone (strata tier restore); the controller's
// records stay authoritative while the cluster lives.
//
//	{
//	  "version": 1,
//	  "topic": "orders",
//	  "topicId": "0f8fad5b-d9cb-469f-a165-70867728950e",
//	  "partition": 3,
//	  "segments": [
//	    {
//	      "segmentId": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
//	      "baseOffset": 0,
//	      "endOffset": 9999,              inclusive
//	      "maxTimestamp": 1764417600000,  unix ms
//	      "sizeBytes": 1048576,           the .log object
//	      "leaderEpochs": [{"epoch": 0, "startOffset": 0}],
//	      "state": "COPY_FINISHED",
//	      "files": {"log": 1048576, "index": 800, "timeindex": 1200, "snapshot": 0, "epochs": 24}
//	    }
//	  ],
//	  "logStartOffset": 0,
//	  "updatedAt": 1764417600123          unix ms
//	}
//
// Format migration: a reader refuses a version it does not know
// (ErrCorruptManifest) and any field it does not know, so a new field
// means a new version, and readers of version N learn N+1 before writers
// start writing it.
//
//   - version 1: segments of six objects (SegmentExts).
//   - version 2 (issue 20): files may record "meta", the size of the
//     segment's packed metadata object (pack.go); such a segment has
//     only its .log and .meta. Version 1 manifests are still read, and
//     rewritten as version 2 at their next change.

// ManifestVersion is the manifest format this code writes.
const ManifestVersion = 2

// minManifestVersion is the oldest manifest format this code reads.
const minManifestVersion = 1

// maxManifestBytes bounds what Load reads: a larger object is refused as
// corrupt rather than read into memory (about 2 million segments' worth).
const maxManifestBytes = 512 << 20

var (
	// ErrCorruptManifest is returned by [DecodeManifest] (and so
	// [ManifestStore.Load]) for bytes that are not a valid manifest of a
	// known version.
	ErrCorruptManifest = errors.New("tiering: corrupt manifest")
	// ErrInvalidManifest is returned by [Manifest.Validate] for a manifest
	// that breaks an invariant.
	ErrInvalidManifest = errors.New("tiering: invalid manifest")
	// ErrManifestContention is returned by [ManifestStore.Update] when
	// every attempt lost its conditional write to another writer.
	ErrManifestContention = errors.New("tiering: manifest update contention")
)

// SegmentState is a remote segment's lifecycle state, spelled as Kafka's
// RemoteLogSegmentState (see the package comment's diagram).
type SegmentState string

// Remote segment states.
const (
	StateCopyStarted    SegmentState = "COPY_STARTED"
	StateCopyFinished   SegmentState = "COPY_FINISHED"
	StateDeleteStarted  SegmentState = "DELETE_STARTED"
	StateDeleteFinished SegmentState = "DELETE_FINISHED"
)

// Valid reports whether s is one of the four states.
func (s SegmentState) Valid() bool {
	switch s {
	case StateCopyStarted, StateCopyFinished, StateDeleteStarted, StateDeleteFinished:
		return true
	}
	return false
}

// CanMoveTo reports whether a segment in state s may be recorded in state
// next: forward along the lifecycle in the package comment, or to itself.
func (s SegmentState) CanMoveTo(next SegmentState) bool {
	if s == next {
		return s.Valid()
	}
	switch s {
	case StateCopyStarted:
		return next == StateCopyFinished || next == StateDeleteStarted
	case StateCopyFinished:
		return next == StateDeleteStarted
	case StateDeleteStarted:
		return next == StateDeleteFinished
	}
	return false
}

// EpochEntry says that leader epoch Epoch began at StartOffset.
type EpochEntry struct {
	Epoch       int32 `json:"epoch"`
	StartOffset int64 `json:"startOffset"`
}

// FileSizes are the sizes in bytes of a segment's uploaded objects, one
// per extension in [SegmentExts].
type FileSizes struct {
	Log       int64 `json:"log"`
	Index     int64 `json:"index"`
	TimeIndex int64 `json:"timeindex"`
	Snapshot  int64 `json:"snapshot"`
	Epochs    int64 `json:"epochs"`
	TxnIndex  int64 `json:"txnindex,omitempty"` // 0 also for a segment uploaded without one
	// Meta is the size of the packed .meta object (version 2); 0 for a
	// segment of separate objects. The sizes above are then those of its
	// sections.
	Meta int64 `json:"meta,omitempty"`
}

// Size returns the size of the object with extension ext, and false for
// an unknown extension.
func (f FileSizes) Size(ext string) (int64, bool) {
	switch ext {
	case ExtLog:
		return f.Log, true
	case ExtIndex:
		return f.Index, true
	case ExtTimeIndex:
		return f.TimeIndex, true
	case ExtSnapshot:
		return f.Snapshot, true
	case ExtEpochs:
		return f.Epochs, true
	case ExtTxnIndex:
		return f.TxnIndex, true
	case ExtMeta:
		return f.Meta, true
	}
	return 0, false
}

// Segment is one remote segment of a partition.
type Segment struct {
	SegmentID    uuid.UUID    `json:"segmentId"`
	BaseOffset   int64        `json:"baseOffset"`
	EndOffset    int64        `json:"endOffset"`    // inclusive
	MaxTimestamp int64        `json:"maxTimestamp"` // unix ms; -1 if none
	SizeBytes    int64        `json:"sizeBytes"`    // of the .log object
	LeaderEpochs []EpochEntry `json:"leaderEpochs"`
	State        SegmentState `json:"state"`
	Files        FileSizes    `json:"files"`
}

// Manifest lists a partition's remote segments, sorted by base offset.
type Manifest struct {
	Version        int       `json:"version"`
	Topic          string    `json:"topic"`
	TopicID        uuid.UUID `json:"topicId"`
	Partition      int32     `json:"partition"`
	Segments       []Segment `json:"segments"`
	LogStartOffset int64     `json:"logStartOffset"` // the remote log start
	UpdatedAt      int64     `json:"updatedAt"`      // unix ms of the last write
	// Configs are the topic's own configs (Kafka names) at the last
	// write: `strata tier restore` recreates the topic with them.
	Configs map[string]string `json:"configs,omitempty"`
	// ChunkSeq (version 2) is the last manifest chunk folded into this
	// base (manifest_chunks.go); in a manifest Load returns, the last
	// chunk applied. 0: none.
	ChunkSeq int64 `json:"chunkSeq,omitempty"`
}

// Validate checks the manifest's invariants: a known version, a legal
// topic name and a non-nil topic id, a partition >= 0, and segments sorted
// by base offset with strictly increasing end offsets (segments may
// overlap: after a leader change a new leader's segmentation can straddle
// the old remote end, and it uploads that segment whole, since committed
// offsets hold the same batches on every replica; a segment wholly inside
// another is never written), each with 0 <= baseOffset <= endOffset,
// a known state, a non-nil unique id, sizes >= 0, sizeBytes equal to the
// log file's size, and leader epochs rising in epoch with non-decreasing
// start offsets within [baseOffset, endOffset] (the first at baseOffset).
// The error wraps [ErrInvalidManifest].
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidManifest}, args...)...)
	}
	if m.Version < minManifestVersion || m.Version > ManifestVersion {
		return bad("version %d", m.Version)
	}
	if !validTopicName(m.Topic) {
		return bad("topic name %q", m.Topic)
	}
	if m.TopicID == uuid.Nil {
		return bad("nil topic id")
	}
	if m.Partition < 0 {
		return bad("partition %d", m.Partition)
	}
	if m.LogStartOffset < 0 {
		return bad("log start offset %d", m.LogStartOffset)
	}
	if m.ChunkSeq < 0 || (m.ChunkSeq > 0 && m.Version < 2) {
		return bad("chunk seq %d in a version %d manifest", m.ChunkSeq, m.Version)
	}
	for k := range m.Configs {
		if k == "" {
			return bad("empty config name")
		}
	}
	seen := make(map[uuid.UUID]struct{}, len(m.Segments))
	for i := range m.Segments {
		s := &m.Segments[i]
		if s.SegmentID == uuid.Nil {
			return bad("segment %d: nil id", i)
		}
		if _, dup := seen[s.SegmentID]; dup {
			return bad("segment %d: duplicate id %s", i, s.SegmentID)
		}
		seen[s.SegmentID] = struct{}{}
		if s.BaseOffset < 0 || s.EndOffset < s.BaseOffset {
			return bad("segment %s: offsets [%d, %d]", s.SegmentID, s.BaseOffset, s.EndOffset)
		}
		if i > 0 && s.BaseOffset < m.Segments[i-1].BaseOffset {
			return bad("segment %s at %d precedes the one at %d",
				s.SegmentID, s.BaseOffset, m.Segments[i-1].BaseOffset)
		}
		if i > 0 && s.EndOffset <= m.Segments[i-1].EndOffset {
			return bad("segment %s ends at %d, not after the previous one's end %d",
				s.SegmentID, s.EndOffset, m.Segments[i-1].EndOffset)
		}
		if !s.State.Valid() {
			return bad("segment %s: state %q", s.SegmentID, s.State)
		}
		f := s.Files
		if s.SizeBytes < 0 || f.Log < 0 || f.Index < 0 || f.TimeIndex < 0 || f.Snapshot < 0 || f.Epochs < 0 || f.TxnIndex < 0 || f.Meta < 0 {
			return bad("segment %s: negative size", s.SegmentID)
		}
		if f.Meta > 0 && m.Version < 2 {
			return bad("segment %s: a packed .meta in a version %d manifest", s.SegmentID, m.Version)
		}
		if s.SizeBytes != f.Log {
			return bad("segment %s: sizeBytes %d but log file %d", s.SegmentID, s.SizeBytes, f.Log)
		}
		for j, e := range s.LeaderEpochs {
			if e.Epoch < 0 || e.StartOffset < s.BaseOffset || e.StartOffset > s.EndOffset {
				return bad("segment %s: leader epoch %d at %d", s.SegmentID, e.Epoch, e.StartOffset)
			}
			if j == 0 && e.StartOffset != s.BaseOffset {
				return bad("segment %s: first leader epoch starts at %d, not %d", s.SegmentID, e.StartOffset, s.BaseOffset)
			}
			if j > 0 {
				p := s.LeaderEpochs[j-1]
				if e.Epoch <= p.Epoch || e.StartOffset < p.StartOffset {
					return bad("segment %s: leader epochs out of order", s.SegmentID)
				}
			}
		}
	}
	return nil
}

// Find returns the index of the segment with id, or -1.
func (m *Manifest) Find(id uuid.UUID) int {
	for i := range m.Segments {
		if m.Segments[i].SegmentID == id {
			return i
		}
	}
	return -1
}

// Readable returns the COPY_FINISHED segment that serves offset: among
// the COPY_FINISHED segments containing it, the one with the greatest base
// offset (segments may overlap; see [Manifest.Validate]). Only
// COPY_FINISHED segments are served: a COPY_STARTED segment may be
// partial, a deleting one may be gone. It searches in O(log n) over a
// valid manifest's sorted segments: the candidates are the segments up to
// the last with base <= offset, walked back while they still reach offset
// (end offsets rise, so once one ends below offset every earlier one
// does).
func (m *Manifest) Readable(offset int64) (Segment, bool) {
	// i: the number of segments with base <= offset.
	i, _ := slices.BinarySearchFunc(m.Segments, offset, func(s Segment, off int64) int {
		if s.BaseOffset <= off {
			return -1
		}
		return 1
	})
	for j := i - 1; j >= 0 && m.Segments[j].EndOffset >= offset; j-- {
		if m.Segments[j].State == StateCopyFinished {
			return m.Segments[j], true
		}
	}
	return Segment{}, false
}

// SegmentKey returns the key of the file with extension ext of segment s
// of this manifest's partition, under prefix (see [SegmentKey]).
func (m *Manifest) SegmentKey(prefix string, s *Segment, ext string) string {
	return SegmentKey(prefix, m.Topic, m.TopicID, m.Partition, s.BaseOffset, s.SegmentID, ext)
}

// Encode returns the manifest's canonical JSON: equal manifests encode to
// equal bytes (fields in a fixed order, no maps, empty lists as []), so
// an unchanged manifest is recognised by its bytes and never rewritten.
// It does not validate; [ManifestStore.Update] does before writing.
func (m *Manifest) Encode() ([]byte, error) {
	c := *m
	if c.Segments == nil {
		c.Segments = []Segment{}
	}
	segs := make([]Segment, len(c.Segments))
	for i, s := range c.Segments {
		if s.LeaderEpochs == nil {
			s.LeaderEpochs = []EpochEntry{}
		}
		segs[i] = s
	}
	c.Segments = segs
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("tiering: encode manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeManifest parses and validates a manifest. It refuses, with an
// error wrapping [ErrCorruptManifest], anything but a single JSON object
// of a version from 1 to [ManifestVersion] with only known fields that passes
// [Manifest.Validate]. Empty lists decode as nil.
func DecodeManifest(data []byte) (Manifest, error) {
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrCorruptManifest, err)
	}
	if probe.Version == nil {
		return Manifest{}, fmt.Errorf("%w: no version", ErrCorruptManifest)
	}
	if *probe.Version < minManifestVersion || *probe.Version > ManifestVersion {
		return Manifest{}, fmt.Errorf("%w: unsupported version %d", ErrCorruptManifest, *probe.Version)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrCorruptManifest, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Manifest{}, fmt.Errorf("%w: trailing data", ErrCorruptManifest)
	}
	if len(m.Segments) == 0 {
		m.Segments = nil
	}
	if len(m.Configs) == 0 {
		m.Configs = nil
	}
	for i := range m.Segments {
		if len(m.Segments[i].LeaderEpochs) == 0 {
			m.Segments[i].LeaderEpochs = nil
		}
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrCorruptManifest, err)
	}
	return m, nil
}

// ManifestStore reads and writes partition manifests in an object store
// with optimistic concurrency: every write is conditional on the ETag it
// read (or on absence), and a lost race re-reads and re-applies. Safe for
// concurrent use. Since version 2 a change is a chunk (manifest_chunks.go);
// the store remembers the last state it read or wrote of each manifest,
// so a change costs no read of the history.
type ManifestStore struct {
	store objstore.ObjectStore

	mu    sync.Mutex
	cache map[string]manifestState // guarded by mu: the last state read or written per key

	// CompactAfter is how many chunks past the base make CompactionDue
	// true; 0 means DefaultManifestCompactAfter.
	CompactAfter int

	// MaxAttempts bounds Update's read-modify-write rounds; 0 means 10.
	MaxAttempts int
	// Backoff is the base pause after a lost race, doubled each round up
	// to 32 times, with full jitter; 0 means 5ms.
	Backoff time.Duration
	// Now stamps UpdatedAt; nil means time.Now.
	Now func() time.Time
}

// NewManifestStore returns a ManifestStore over store. Every call runs
// under its caller's context, whose deadline bounds it.
func NewManifestStore(store objstore.ObjectStore) *ManifestStore {
	return &ManifestStore{store: store}
}

// Load reads the manifest at key (its base, then its chunks applied in
// order) and the ETag of the base object.
// A missing manifest is an error wrapping objstore.ErrNotFound; one that
// does not decode wraps [ErrCorruptManifest].
//
// The ETag is read (Head) before the body (Get), so a write between the
// two leaves a stale ETag, which only fails the caller's IfMatch write:
// never a new ETag over old content. Where the ETag is a plain MD5 (every
// single-part upload, which manifests are), the body is also checked
// against it and re-read on a mismatch.
func (s *ManifestStore) Load(ctx context.Context, key string) (Manifest, string, error) {
	st, err := s.loadState(ctx, key)
	if err != nil {
		s.forget(key)
		return Manifest{}, "", err
	}
	s.remember(key, st)
	return st.m, st.etag, nil
}

// loadBase reads the base object at key (manifest.json) alone: Load
// before chunks.
func (s *ManifestStore) loadBase(ctx context.Context, key string) (Manifest, string, error) {
	const reads = 3
	for range reads {
		info, err := s.store.Head(ctx, key)
		if err != nil {
			return Manifest{}, "", fmt.Errorf("tiering: manifest %s: %w", key, err)
		}
		if info.Size > maxManifestBytes {
			return Manifest{}, "", fmt.Errorf("%w: %s is %d bytes", ErrCorruptManifest, key, info.Size)
		}
		data, err := s.get(ctx, key)
		if err != nil {
			return Manifest{}, "", fmt.Errorf("tiering: manifest %s: %w", key, err)
		}
		if isMD5(info.ETag) {
			sum := md5.Sum(data)
			if hex.EncodeToString(sum[:]) != info.ETag {
				continue // rewritten between Head and Get
			}
		}
		m, err := DecodeManifest(data)
		if err != nil {
			return Manifest{}, "", fmt.Errorf("%s: %w", key, err)
		}
		if err := checkManifestKey(key, &m); err != nil {
			return Manifest{}, "", fmt.Errorf("%w: %w", ErrCorruptManifest, err)
		}
		return m, info.ETag, nil
	}
	return Manifest{}, "", fmt.Errorf("%w: manifest %s kept changing while read", ErrManifestContention, key)
}

func (s *ManifestStore) get(ctx context.Context, key string) ([]byte, error) {
	rc, err := s.store.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("%w: over %d bytes", ErrCorruptManifest, maxManifestBytes)
	}
	return data, nil
}

func isMD5(etag string) bool {
	if len(etag) != 2*md5.Size {
		return false
	}
	_, err := hex.DecodeString(etag)
	return err == nil
}

// Update applies fn to the manifest at key and writes the change back
// conditionally, returning the result (or what it found, if fn changed
// nothing). fn gets the current manifest, or a zero one of version
// [ManifestVersion] when none exists (fn then fills in topic, id and
// partition). fn may run several times (once per round) and must be
// idempotent: applied to a manifest that already has its change, it
// changes nothing. An error from fn ends Update with that error.
//
// Each round: the state (remembered from this store's last read or write
// of key, else Load; a fresh Load after a lost race) → fn → nothing
// changed: return without writing → stamp UpdatedAt, Validate → write:
// the base create-only when there is none; the whole base IfMatch when
// it is version 1 (upgraded); otherwise the next chunk create-only, then
// a HEAD of the base (a compaction in between makes the round start
// again from a fresh Load, see manifest_chunks.go). A failed
// precondition starts another round after a jittered backoff; after
// MaxAttempts rounds the error wraps [ErrManifestContention]. Any other
// error is returned at once.
//
// A lost PUT acknowledgement is safe: the retried Put (by a retrying
// store, or the caller's next Update) fails its precondition, the next
// round finds fn's change already there, and nothing is written twice.
func (s *ManifestStore) Update(ctx context.Context, key string, fn func(*Manifest) error) (Manifest, error) {
	attempts := s.MaxAttempts
	if attempts <= 0 {
		attempts = 10
	}
	base := s.Backoff
	if base <= 0 {
		base = 5 * time.Millisecond
	}
	var lastErr error
	fresh := false
	for round := range attempts {
		if round > 0 && !fresh {
			if err := sleepJitter(ctx, base, round); err != nil {
				return Manifest{}, fmt.Errorf("tiering: update manifest %s: %w (last: %w)", key, err, lastErr)
			}
		}
		st, exists := manifestState{}, false
		if c, ok := s.cached(key); ok && round == 0 {
			st, exists = c, true
		} else {
			var err error
			st, err = s.loadState(ctx, key)
			switch {
			case err == nil:
				exists = true
			case errors.Is(err, objstore.ErrNotFound):
			default:
				s.forget(key)
				return Manifest{}, err
			}
		}
		fresh = false
		m := Manifest{Version: ManifestVersion}
		if exists {
			m = cloneManifest(st.m)
		}
		if err := fn(&m); err != nil {
			return Manifest{}, err
		}
		var chunk manifestChunk
		if exists {
			var changed bool
			if chunk, changed = diffManifest(&st.m, &m); !changed {
				s.remember(key, st)
				return m, nil
			}
		}
		m.UpdatedAt = s.now().UnixMilli()
		m.Version = ManifestVersion // an older manifest is upgraded at its first change
		if err := m.Validate(); err != nil {
			return Manifest{}, fmt.Errorf("tiering: update manifest %s: %w", key, err)
		}
		if err := checkManifestKey(key, &m); err != nil {
			return Manifest{}, fmt.Errorf("tiering: update manifest: %w", err)
		}
		var err error
		if !exists || st.baseVersion < 2 {
			err = s.putBase(ctx, key, &m, exists, st.etag)
		} else {
			chunk.Seq, chunk.UpdatedAt = st.next, m.UpdatedAt
			m.ChunkSeq = st.next
			err = s.putChunk(ctx, key, &chunk, st)
			if errors.Is(err, errChunkGap) {
				// Written, but a compaction may have folded another chunk
				// of that seq: read again and re-apply (fn's change found
				// in, nothing more is written).
				lastErr, fresh = err, true
				s.forget(key)
				continue
			}
			if err == nil {
				st.m, st.next = m, st.next+1
				s.remember(key, st)
			}
		}
		if err == nil {
			return m, nil
		}
		s.forget(key)
		if !errors.Is(err, objstore.ErrPreconditionFailed) {
			return Manifest{}, fmt.Errorf("tiering: update manifest %s: %w", key, err)
		}
		lastErr = err
	}
	return Manifest{}, fmt.Errorf("%w: %s: %d rounds lost: %w", ErrManifestContention, key, attempts, lastErr)
}

// putBase writes m whole as the base at key: create-only, or IfMatch etag.
func (s *ManifestStore) putBase(ctx context.Context, key string, m *Manifest, exists bool, etag string) error {
	m.ChunkSeq = 0
	data, err := m.Encode()
	if err != nil {
		return err
	}
	opts := objstore.PutOptions{Mode: objstore.CreateOnly}
	if exists {
		opts = objstore.PutOptions{Mode: objstore.IfMatch, ETag: etag}
	}
	info, err := s.store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		return err
	}
	s.remember(key, manifestState{m: *m, etag: info.ETag, baseVersion: m.Version, next: 1})
	return nil
}

// putChunk writes chunk c create-only, then checks the base is still the
// one st read (errChunkGap if not).
func (s *ManifestStore) putChunk(ctx context.Context, key string, c *manifestChunk, st manifestState) error {
	data, err := encodeChunk(c)
	if err != nil {
		return err
	}
	if _, err := s.store.Put(ctx, manifestChunkKey(key, c.Seq), bytes.NewReader(data), int64(len(data)), objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
		return err
	}
	info, err := s.store.Head(ctx, key)
	if err != nil {
		return err
	}
	if info.ETag != st.etag {
		return fmt.Errorf("%w: base of %s rewritten", errChunkGap, key)
	}
	return nil
}

// checkManifestKey returns an error wrapping [ErrInvalidManifest] unless
// key is m's partition's manifest key under some prefix: a manifest is
// never read from, or written to, another partition's place.
func checkManifestKey(key string, m *Manifest) error {
	want := ManifestKey("", m.Topic, m.TopicID, m.Partition)
	if key == want || strings.HasSuffix(key, "/"+want) {
		return nil
	}
	return fmt.Errorf("%w: manifest of %s-%s/%d at key %s", ErrInvalidManifest, m.Topic, m.TopicID, m.Partition, key)
}

func (s *ManifestStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// sleepJitter sleeps a uniformly random time in [0, base<<min(round,5)),
// or until ctx ends.
func sleepJitter(ctx context.Context, base time.Duration, round int) error {
	d := base << min(round, 5)
	t := time.NewTimer(rand.N(d) + 1)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
