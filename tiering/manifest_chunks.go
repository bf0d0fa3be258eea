package tiering

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/strata-io/strata/tiering/objstore"
)

// Chunked manifests (version 2, issue 20): a change no longer rewrites
// the whole manifest. manifest.json is the base, folded through chunk
// "chunkSeq"; each later change is one small create-only object
//
//	<partition dir>/manifest.d/<seq, 20 digits>.json
//	{"version": 2, "seq": 7, "put": [segments added or changed],
//	 "remove": [segment ids], "logStartOffset": 0, "configs": {...},
//	 "updatedAt": 1764417600123}
//
// holding what changed (put, remove) and the new values of the small
// fields (logStartOffset, configs, updatedAt). Readers apply chunks
// chunkSeq+1, chunkSeq+2, ... in order onto the base. Writers:
//
//   - the next chunk's seq is one past the last one read: a create-only
//     Put, so of two writers racing for a seq one wins and the other
//     re-reads and re-applies its change (the conditional write of
//     version 1, moved from the manifest's ETag to the chunk's name);
//   - compaction folds the chunks into a new base (IfMatch on the base's
//     ETag, so two compactions cannot both win), then deletes them. A
//     writer that raced a compaction may have created a chunk the new
//     base already covers (its seq at or below chunkSeq, re-created after
//     the delete): so after each chunk write the writer checks the base's
//     ETag, and if the base changed it re-reads and re-applies (fn is
//     idempotent: if its change is in, nothing more is written);
//   - a version 1 base is rewritten whole as version 2 at its first
//     change (never chunks next to a version 1 base, which an older
//     reader would read without them); chunks never exist without a base.
//
// The store keeps the last state it read or wrote per manifest, so in
// the steady state a change costs one chunk PUT and one HEAD of the base,
// whatever the partition's history; compaction (after
// ManifestStore.CompactAfter chunks, default 64) one base PUT and a
// DELETE per chunk.

// manifestChunkDir is the directory of a partition's manifest chunks.
const manifestChunkDir = "manifest.d"

// DefaultManifestCompactAfter is ManifestStore.CompactAfter's default.
const DefaultManifestCompactAfter = 64

// maxManifestChunks bounds the chunks one Load applies: more means
// compaction has not run for very long, or garbage.
const maxManifestChunks = 100_000

// errChunkGap: the chunks listed do not follow the base read: a
// compaction ran in between; read again.
var errChunkGap = errors.New("tiering: manifest chunks do not follow the base")

// manifestChunkPrefix returns the key prefix of the chunks of the
// manifest at key.
func manifestChunkPrefix(key string) string {
	return strings.TrimSuffix(key, ManifestName) + manifestChunkDir + "/"
}

func manifestChunkKey(key string, seq int64) string {
	return fmt.Sprintf("%s%0*d.json", manifestChunkPrefix(key), offsetWidth, seq)
}

// parseChunkSeq returns the seq of a chunk key under prefix.
func parseChunkSeq(prefix, k string) (int64, bool) {
	name, ok := strings.CutPrefix(k, prefix)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(name, ".json")
	if !ok || len(digits) != offsetWidth || !allDigits(digits) {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n > 0
}

// manifestChunk is one chunk object.
type manifestChunk struct {
	Version        int               `json:"version"`
	Seq            int64             `json:"seq"`
	Put            []Segment         `json:"put"`
	Remove         []uuid.UUID       `json:"remove"`
	LogStartOffset int64             `json:"logStartOffset"`
	Configs        map[string]string `json:"configs,omitempty"`
	UpdatedAt      int64             `json:"updatedAt"`
}

// diffManifest returns the chunk that turns prev into next, and whether
// anything but UpdatedAt differs.
func diffManifest(prev, next *Manifest) (manifestChunk, bool) {
	c := manifestChunk{Version: ManifestVersion, LogStartOffset: next.LogStartOffset, Configs: next.Configs, UpdatedAt: next.UpdatedAt}
	old := make(map[uuid.UUID]*Segment, len(prev.Segments))
	for i := range prev.Segments {
		old[prev.Segments[i].SegmentID] = &prev.Segments[i]
	}
	seen := make(map[uuid.UUID]bool, len(next.Segments))
	for i := range next.Segments {
		s := &next.Segments[i]
		seen[s.SegmentID] = true
		if o, ok := old[s.SegmentID]; !ok || !segmentEqual(o, s) {
			c.Put = append(c.Put, *s)
		}
	}
	for i := range prev.Segments {
		if id := prev.Segments[i].SegmentID; !seen[id] {
			c.Remove = append(c.Remove, id)
		}
	}
	changed := len(c.Put) > 0 || len(c.Remove) > 0 || prev.LogStartOffset != next.LogStartOffset ||
		!configsEqual(prev.Configs, next.Configs) || prev.Topic != next.Topic || prev.TopicID != next.TopicID || prev.Partition != next.Partition
	return c, changed
}

func segmentEqual(a, b *Segment) bool {
	return a.SegmentID == b.SegmentID && a.BaseOffset == b.BaseOffset && a.EndOffset == b.EndOffset &&
		a.MaxTimestamp == b.MaxTimestamp && a.SizeBytes == b.SizeBytes && a.State == b.State &&
		a.Files == b.Files && slices.Equal(a.LeaderEpochs, b.LeaderEpochs)
}

func configsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// applyChunk applies c onto m: removals, then puts (replacing a segment
// of the same id), segments sorted by base then end offset.
func applyChunk(m *Manifest, c *manifestChunk) {
	if len(c.Remove) > 0 || len(c.Put) > 0 {
		drop := make(map[uuid.UUID]bool, len(c.Remove)+len(c.Put))
		for _, id := range c.Remove {
			drop[id] = true
		}
		for i := range c.Put {
			drop[c.Put[i].SegmentID] = true
		}
		kept := make([]Segment, 0, len(m.Segments)+len(c.Put))
		for _, s := range m.Segments {
			if !drop[s.SegmentID] {
				kept = append(kept, s)
			}
		}
		kept = append(kept, c.Put...)
		slices.SortStableFunc(kept, func(a, b Segment) int {
			if a.BaseOffset != b.BaseOffset {
				return cmpInt64(a.BaseOffset, b.BaseOffset)
			}
			return cmpInt64(a.EndOffset, b.EndOffset)
		})
		m.Segments = kept
	}
	if len(m.Segments) == 0 {
		m.Segments = nil
	}
	for i := range m.Segments {
		if len(m.Segments[i].LeaderEpochs) == 0 {
			m.Segments[i].LeaderEpochs = nil
		}
	}
	m.LogStartOffset = c.LogStartOffset
	m.Configs = c.Configs
	if len(m.Configs) == 0 {
		m.Configs = nil
	}
	m.UpdatedAt = c.UpdatedAt
	m.ChunkSeq = c.Seq
}

func encodeChunk(c *manifestChunk) ([]byte, error) {
	cc := *c
	if cc.Put == nil {
		cc.Put = []Segment{}
	}
	for i := range cc.Put {
		if cc.Put[i].LeaderEpochs == nil {
			cc.Put[i].LeaderEpochs = []EpochEntry{}
		}
	}
	if cc.Remove == nil {
		cc.Remove = []uuid.UUID{}
	}
	b, err := json.Marshal(&cc)
	if err != nil {
		return nil, fmt.Errorf("tiering: encode manifest chunk: %w", err)
	}
	return append(b, '\n'), nil
}

func decodeChunk(data []byte, seq int64) (manifestChunk, error) {
	var c manifestChunk
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%w: chunk %d: %w", ErrCorruptManifest, seq, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return c, fmt.Errorf("%w: chunk %d: trailing data", ErrCorruptManifest, seq)
	}
	if c.Version != ManifestVersion || c.Seq != seq {
		return c, fmt.Errorf("%w: chunk %d: version %d, seq %d", ErrCorruptManifest, seq, c.Version, c.Seq)
	}
	return c, nil
}

// manifestState is what a ManifestStore knows of one manifest: the
// state through chunk next-1, the base's ETag and fold point.
type manifestState struct {
	m           Manifest
	etag        string // of the base
	baseSeq     int64  // the base's chunkSeq
	baseVersion int
	next        int64   // the seq of the next chunk
	stale       []int64 // chunks at or below baseSeq still listed
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}

func cloneManifest(m Manifest) Manifest {
	c := m
	if m.Segments != nil {
		c.Segments = make([]Segment, len(m.Segments))
		for i, s := range m.Segments {
			s.LeaderEpochs = slices.Clone(s.LeaderEpochs)
			c.Segments[i] = s
		}
	}
	if m.Configs != nil {
		c.Configs = make(map[string]string, len(m.Configs))
		for k, v := range m.Configs {
			c.Configs[k] = v
		}
	}
	return c
}

// maxCachedManifests bounds the states a ManifestStore keeps.
const maxCachedManifests = 4096

func (s *ManifestStore) cached(key string) (manifestState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.cache[key]
	if !ok {
		return manifestState{}, false
	}
	st.m = cloneManifest(st.m)
	return st, true
}

func (s *ManifestStore) remember(key string, st manifestState) {
	st.m = cloneManifest(st.m)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cache == nil {
		s.cache = map[string]manifestState{}
	}
	if _, ok := s.cache[key]; !ok && len(s.cache) >= maxCachedManifests {
		for k := range s.cache { // any one
			delete(s.cache, k)
			break
		}
	}
	s.cache[key] = st
}

func (s *ManifestStore) forget(key string) {
	s.mu.Lock()
	delete(s.cache, key)
	s.mu.Unlock()
}

// loadState reads the base at key and applies its chunks. A missing base
// wraps objstore.ErrNotFound.
func (s *ManifestStore) loadState(ctx context.Context, key string) (manifestState, error) {
	var lastErr error
	for range 3 {
		base, etag, err := s.loadBase(ctx, key)
		if err != nil {
			return manifestState{}, err
		}
		st := manifestState{m: base, etag: etag, baseSeq: base.ChunkSeq, baseVersion: base.Version, next: base.ChunkSeq + 1}
		if base.Version < 2 {
			// No chunks beside a version 1 base (see above).
			return st, nil
		}
		err = s.applyChunks(ctx, key, &st)
		if errors.Is(err, errChunkGap) {
			lastErr = err
			continue
		}
		if err != nil {
			return manifestState{}, err
		}
		return st, nil
	}
	return manifestState{}, fmt.Errorf("%w: %s: %w", ErrManifestContention, key, lastErr)
}

func (s *ManifestStore) applyChunks(ctx context.Context, key string, st *manifestState) error {
	prefix := manifestChunkPrefix(key)
	objs, err := s.store.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("tiering: manifest %s: list chunks: %w", key, err)
	}
	var seqs []int64
	st.stale = nil
	for _, o := range objs {
		n, ok := parseChunkSeq(prefix, o.Key)
		switch {
		case ok && n > st.baseSeq:
			seqs = append(seqs, n)
		case ok:
			st.stale = append(st.stale, n) // folded; a compaction was cut short
		}
	}
	slices.Sort(seqs)
	if len(seqs) > maxManifestChunks {
		return fmt.Errorf("%w: %s: %d chunks", ErrCorruptManifest, key, len(seqs))
	}
	for i, n := range seqs {
		if n != st.baseSeq+1+int64(i) {
			// A compaction between our base read and the listing (the
			// first is past base+1), or a chunk deleted under us.
			return fmt.Errorf("%w: %s: chunk %d after %d", errChunkGap, key, n, st.baseSeq+int64(i))
		}
		data, err := s.get(ctx, manifestChunkKey(key, n))
		if errors.Is(err, objstore.ErrNotFound) {
			return fmt.Errorf("%w: %s: chunk %d gone", errChunkGap, key, n)
		}
		if err != nil {
			return fmt.Errorf("tiering: manifest %s: chunk %d: %w", key, n, err)
		}
		c, err := decodeChunk(data, n)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		applyChunk(&st.m, &c)
		st.next = n + 1
	}
	if err := st.m.Validate(); err != nil {
		return fmt.Errorf("%w: %s with its chunks: %w", ErrCorruptManifest, key, err)
	}
	return nil
}

// CompactionDue reports whether the manifest at key, as this store last
// read or wrote it, has CompactAfter chunks or more past its base.
func (s *ManifestStore) CompactionDue(key string) bool {
	st, ok := s.cached(key)
	return ok && st.baseVersion >= 2 && st.next-1-st.baseSeq >= int64(s.compactAfter())
}

func (s *ManifestStore) compactAfter() int {
	if s.CompactAfter > 0 {
		return s.CompactAfter
	}
	return DefaultManifestCompactAfter
}

// Compact folds the chunks of the manifest at key into a new base
// (IfMatch on the base it read: a concurrent compaction or base rewrite
// wins, and this one does nothing), then deletes the folded chunks. It
// reports whether it wrote a base. Readers see the same manifest before,
// during and after; a crash between the base write and the deletes
// leaves chunks at or below chunkSeq, which readers skip and the next
// compaction deletes.
func (s *ManifestStore) Compact(ctx context.Context, key string) (bool, error) {
	st, err := s.loadState(ctx, key)
	if err != nil {
		s.forget(key)
		return false, err
	}
	if st.next-1 == st.baseSeq && st.baseVersion >= 2 {
		s.remember(key, st)
		return false, nil
	}
	m := st.m
	m.Version = ManifestVersion
	m.ChunkSeq = st.next - 1
	data, err := m.Encode()
	if err != nil {
		return false, err
	}
	info, err := s.store.Put(ctx, key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{Mode: objstore.IfMatch, ETag: st.etag})
	if errors.Is(err, objstore.ErrPreconditionFailed) {
		s.forget(key)
		return false, nil
	}
	if err != nil {
		s.forget(key)
		return false, fmt.Errorf("tiering: compact manifest %s: %w", key, err)
	}
	s.remember(key, manifestState{m: m, etag: info.ETag, baseSeq: m.ChunkSeq, baseVersion: ManifestVersion, next: m.ChunkSeq + 1})
	// The chunks just folded, and any an interrupted compaction left.
	for n := range slices.Values(append(st.stale, seqRange(st.baseSeq+1, m.ChunkSeq)...)) {
		if err := s.store.Delete(ctx, manifestChunkKey(key, n)); err != nil {
			return true, fmt.Errorf("tiering: compact manifest %s: %w", key, err)
		}
	}
	return true, nil
}
