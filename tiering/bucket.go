package tiering

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/tiering/objstore"
)

// What the bucket holds, read from the bucket alone (`strata tier list`,
// `strata tier restore --all`), and whether the segments the controller
// registered are really there (`strata tier verify`).

// BucketTopic is one topic incarnation (name and id) found in the bucket.
type BucketTopic struct {
	Topic      string
	TopicID    uuid.UUID
	UpdatedAt  int64 // unix ms: the newest of its manifests' writes
	Partitions []BucketPartition
}

// BucketPartition is one partition of a [BucketTopic], as its manifest
// and the listing describe it.
type BucketPartition struct {
	Partition int32
	Segments  int   // COPY_FINISHED segments in the manifest
	Objects   int   // objects under the partition's prefix (manifest included)
	Bytes     int64 // their total size
	LogStart  int64 // the manifest's remote log start; -1 without a manifest
	EndOffset int64 // last offset of the last COPY_FINISHED segment; -1 if none
	HasManif  bool  // a manifest.json lies under the prefix
}

// ListBucket lists every topic incarnation under prefix with one List of
// the prefix and one Get per manifest, sorted by topic name, then newest
// incarnation first. Keys that are not tiering's (see paths.go) are
// skipped; a partition with objects but no manifest is listed with
// HasManif false.
func ListBucket(ctx context.Context, store objstore.ObjectStore, prefix string) ([]BucketTopic, error) {
	p := strings.Trim(prefix, "/")
	lp := p
	if lp != "" {
		lp += "/"
	}
	objs, err := store.List(ctx, lp)
	if err != nil {
		return nil, fmt.Errorf("tiering: list bucket: %w", err)
	}
	type tkey struct {
		topic string
		id    uuid.UUID
	}
	topics := map[tkey]map[int32]*BucketPartition{}
	for _, o := range objs {
		rest := o.Key[len(lp):]
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) != 3 {
			continue
		}
		topic, id, ok := parseTopicDir(parts[0])
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(parts[1], 10, 32)
		if err != nil || n < 0 || strconv.FormatInt(n, 10) != parts[1] {
			continue
		}
		k := tkey{topic, id}
		if topics[k] == nil {
			topics[k] = map[int32]*BucketPartition{}
		}
		bp := topics[k][int32(n)]
		if bp == nil {
			bp = &BucketPartition{Partition: int32(n), LogStart: -1, EndOffset: -1}
			topics[k][int32(n)] = bp
		}
		bp.Objects++
		bp.Bytes += o.Size
		if parts[2] == ManifestName {
			bp.HasManif = true
		}
	}
	ms := NewManifestStore(store)
	out := make([]BucketTopic, 0, len(topics))
	for k, parts := range topics {
		bt := BucketTopic{Topic: k.topic, TopicID: k.id, UpdatedAt: -1}
		for _, bp := range parts {
			if bp.HasManif {
				m, _, err := ms.Load(ctx, ManifestKey(prefix, k.topic, k.id, bp.Partition))
				if err != nil {
					return nil, fmt.Errorf("tiering: list bucket: %w", err)
				}
				bt.UpdatedAt = max(bt.UpdatedAt, m.UpdatedAt)
				bp.LogStart = m.LogStartOffset
				for _, s := range m.Segments {
					if s.State == StateCopyFinished {
						bp.Segments++
						bp.EndOffset = max(bp.EndOffset, s.EndOffset)
					}
				}
			}
			bt.Partitions = append(bt.Partitions, *bp)
		}
		slices.SortFunc(bt.Partitions, func(a, b BucketPartition) int { return int(a.Partition) - int(b.Partition) })
		out = append(out, bt)
	}
	slices.SortFunc(out, func(a, b BucketTopic) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		if a.UpdatedAt != b.UpdatedAt {
			if a.UpdatedAt > b.UpdatedAt {
				return -1
			}
			return 1
		}
		return compareIDs(b.TopicID, a.TopicID)
	})
	return out, nil
}

// parseTopicDir splits "<topic>-<canonical uuid>" (writeTopicDir's form).
func parseTopicDir(dir string) (string, uuid.UUID, bool) {
	if len(dir) < uuidWidth+2 || dir[len(dir)-uuidWidth-1] != '-' {
		return "", uuid.Nil, false
	}
	id, ok := parseCanonicalUUID(dir[len(dir)-uuidWidth:])
	topic := dir[:len(dir)-uuidWidth-1]
	if !ok || !validTopicName(topic) {
		return "", uuid.Nil, false
	}
	return topic, id, true
}

// VerifyProblem is one registered segment object that is not as the
// controller and the manifest recorded it.
type VerifyProblem struct {
	Partition  Partition
	SegmentID  uuid.UUID
	BaseOffset int64
	EndOffset  int64
	Key        string
	Problem    string // "missing", or "size N, recorded M"
}

// VerifyPartition checks that every COPY_FINISHED segment of segs (the
// controller's records of partition p) has its objects (SegmentExts, or
// PackedSegmentExts for a segment with a .meta) under the
// bucket, with the .log object of the recorded SizeBytes and the other
// objects of the sizes p's manifest records (when it lists the segment).
// One List of the partition's prefix and one manifest Get; it returns the
// problems found and the number of segments checked.
func VerifyPartition(ctx context.Context, store objstore.ObjectStore, prefix string, p Partition, segs []metadata.RemoteSegmentInfo) ([]VerifyProblem, int, error) {
	objs, err := store.List(ctx, PartitionPrefix(prefix, p.Topic, p.TopicID, p.Index))
	if err != nil {
		return nil, 0, fmt.Errorf("tiering: verify %s-%d: %w", p.Topic, p.Index, err)
	}
	sizes := make(map[string]int64, len(objs))
	for _, o := range objs {
		sizes[o.Key] = o.Size
	}
	var man Manifest
	if _, ok := sizes[ManifestKey(prefix, p.Topic, p.TopicID, p.Index)]; ok {
		if man, _, err = NewManifestStore(store).Load(ctx, ManifestKey(prefix, p.Topic, p.TopicID, p.Index)); err != nil {
			return nil, 0, fmt.Errorf("tiering: verify %s-%d: %w", p.Topic, p.Index, err)
		}
	}
	var probs []VerifyProblem
	checked := 0
	for _, s := range segs {
		if s.State != metadata.CopyFinished {
			continue
		}
		checked++
		rs := FromInfo(p.Topic, s)
		var files *FileSizes
		if i := man.Find(s.SegmentID); i >= 0 {
			files = &man.Segments[i].Files
		}
		exts := SegmentExts
		if _, packed := sizes[rs.Key(prefix, ExtMeta)]; packed || (files != nil && files.Meta > 0) {
			exts = PackedSegmentExts
		}
		for _, ext := range exts {
			key := rs.Key(prefix, ext)
			got, ok := sizes[key]
			want := int64(-1)
			if ext == ExtLog {
				want = s.SizeBytes
			} else if files != nil {
				want, _ = files.Size(ext)
			}
			prob := ""
			switch {
			case !ok && txnIndexOptional(ext, want):
			case !ok:
				prob = "missing"
			case want >= 0 && got != want:
				prob = fmt.Sprintf("size %d, recorded %d", got, want)
			}
			if prob != "" {
				probs = append(probs, VerifyProblem{Partition: p, SegmentID: s.SegmentID, BaseOffset: s.BaseOffset, EndOffset: s.EndOffset, Key: key, Problem: prob})
			}
		}
	}
	return probs, checked, nil
}
