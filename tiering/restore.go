package tiering

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/tiering/objstore"
)

// Restore, the bucket side: find a topic's manifests from the bucket
// alone, check that what they name is really there, and turn them into
// the controller records that re-register the segments. The broker side
// (creating the topic, then Lead, which restarts each empty log after its
// remote tier) is the broker's.

var (
	// ErrTopicNotInBucket is returned by [FindTopicManifests] when no
	// manifest of the topic lies under the prefix.
	ErrTopicNotInBucket = errors.New("tiering: topic not found in the bucket")
	// ErrMissingSegments is wrapped by the [*MissingSegmentsError]
	// FindTopicManifests returns together with usable manifests.
	ErrMissingSegments = errors.New("tiering: remote segments missing from the bucket")
)

// MissingSegment is a manifest segment FindTopicManifests dropped.
type MissingSegment struct {
	Partition int32
	Segment   Segment
	Why       string // which object is missing or has the wrong size, or "after a hole"
}

// MissingSegmentsError lists what [FindTopicManifests] dropped. The
// manifests it is returned with are still usable: each is a hole-free run
// of segments whose objects all exist.
type MissingSegmentsError struct {
	Missing []MissingSegment
}

func (e *MissingSegmentsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: %d dropped", ErrMissingSegments, len(e.Missing))
	for i, m := range e.Missing {
		if i == 5 {
			fmt.Fprintf(&b, "; ...")
			break
		}
		fmt.Fprintf(&b, "; partition %d [%d, %d] %s: %s", m.Partition, m.Segment.BaseOffset, m.Segment.EndOffset, m.Segment.SegmentID, m.Why)
	}
	return b.String()
}

func (e *MissingSegmentsError) Unwrap() error { return ErrMissingSegments }

// FindTopicManifests finds topic's partition manifests under prefix:
//
//  1. one List of "<prefix>/<topic>-" finds every "<topic>-<uuid>/"
//     directory holding a manifest (a longer topic name sharing the
//     prefix, "orders-eu" for "orders", has a directory that is not
//     exactly the name, a '-' and a uuid, and is skipped);
//  2. the topic id whose manifests were updated most recently wins (a
//     topic deleted and recreated leaves older incarnations behind until
//     the janitor removes them);
//  3. each partition's bucket listing (one List per partition) is checked
//     against its manifest: every COPY_FINISHED segment's objects
//     must exist with the sizes the manifest records. Segments that fail
//     are dropped; leading ones only raise the start, but after a present
//     segment the first missing one ends the partition there (a restore
//     never has a hole) and everything after it is dropped too.
//     Segments not COPY_FINISHED are left out silently.
//
// The manifests come back sorted by partition, each with only restorable
// segments and LogStartOffset at least its first segment's base. If
// anything was dropped err is a [*MissingSegmentsError] (wrapping
// [ErrMissingSegments]) and the manifests are still returned; any other
// error returns nothing usable.
func FindTopicManifests(ctx context.Context, store objstore.ObjectStore, prefix, topic string) (uuid.UUID, []Manifest, error) {
	if !validTopicName(topic) {
		return uuid.Nil, nil, fmt.Errorf("tiering: restore: illegal topic name %q", topic)
	}
	p := strings.Trim(prefix, "/")
	listPrefix := topic + "-"
	if p != "" {
		listPrefix = p + "/" + listPrefix
	}
	objs, err := store.List(ctx, listPrefix)
	if err != nil {
		return uuid.Nil, nil, fmt.Errorf("tiering: restore %s: %w", topic, err)
	}
	keys := map[uuid.UUID][]string{} // topic id → manifest keys
	for _, o := range objs {
		rest := o.Key[len(listPrefix):] // "<uuid>/<partition>/manifest.json" for ours
		parts := strings.Split(rest, "/")
		if len(parts) != 3 || parts[2] != ManifestName {
			continue
		}
		id, ok := parseCanonicalUUID(parts[0])
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(parts[1], 10, 32); err != nil || n < 0 || strconv.FormatInt(n, 10) != parts[1] {
			continue
		}
		keys[id] = append(keys[id], o.Key)
	}
	if len(keys) == 0 {
		return uuid.Nil, nil, fmt.Errorf("%w: %s under %q", ErrTopicNotInBucket, topic, prefix)
	}
	ms := NewManifestStore(store)
	var bestID uuid.UUID
	var best []Manifest
	bestAt := int64(-1 << 62)
	for id, ks := range keys {
		var mans []Manifest
		var at int64 = -1 << 62
		for _, k := range ks {
			m, _, err := ms.Load(ctx, k)
			if err != nil {
				return uuid.Nil, nil, fmt.Errorf("tiering: restore %s: %w", topic, err)
			}
			at = max(at, m.UpdatedAt)
			mans = append(mans, m)
		}
		if at > bestAt || (at == bestAt && compareIDs(id, bestID) > 0) {
			bestID, best, bestAt = id, mans, at
		}
	}
	slices.SortFunc(best, func(a, b Manifest) int { return int(a.Partition) - int(b.Partition) })
	var missing []MissingSegment
	for i := range best {
		m := &best[i]
		objs, err := store.List(ctx, PartitionPrefix(prefix, m.Topic, m.TopicID, m.Partition))
		if err != nil {
			return uuid.Nil, nil, fmt.Errorf("tiering: restore %s: %w", topic, err)
		}
		sizes := make(map[string]int64, len(objs))
		for _, o := range objs {
			sizes[o.Key] = o.Size
		}
		var kept []Segment
		hole := false
		for _, s := range m.Segments {
			if s.State != StateCopyFinished {
				continue
			}
			if hole {
				missing = append(missing, MissingSegment{Partition: m.Partition, Segment: s, Why: "after a hole"})
				continue
			}
			if why := checkObjects(m, prefix, &s, sizes); why != "" {
				missing = append(missing, MissingSegment{Partition: m.Partition, Segment: s, Why: why})
				hole = len(kept) > 0
				continue
			}
			kept = append(kept, s)
		}
		m.Segments = kept
		if len(kept) > 0 && m.LogStartOffset < kept[0].BaseOffset {
			m.LogStartOffset = kept[0].BaseOffset
		}
	}
	if len(missing) > 0 {
		return bestID, best, &MissingSegmentsError{Missing: missing}
	}
	return bestID, best, nil
}

// checkObjects returns why segment s of m is not restorable from a
// listing (key → size), or "".
func checkObjects(m *Manifest, prefix string, s *Segment, sizes map[string]int64) string {
	for _, ext := range segmentObjects(s.Files) {
		want, _ := s.Files.Size(ext)
		got, ok := sizes[m.SegmentKey(prefix, s, ext)]
		if !ok && txnIndexOptional(ext, want) {
			continue
		}
		if !ok {
			return "no ." + ext + " object"
		}
		if got != want {
			return fmt.Sprintf(".%s object is %d bytes, manifest says %d", ext, got, want)
		}
	}
	return ""
}

// RestoreRecords returns the records that re-register m's COPY_FINISHED
// segments in a controller: for each, in offset order, a COPY_STARTED
// record with its full description, then COPY_FINISHED, committed by
// brokerID at unix ms now.
//
// They carry WriterLeaderEpoch metadata.UnknownLeaderEpoch: the broker
// that runs a restore (`strata tier restore`, any broker the admin
// request reaches, Node.RestoreTopic) registers segments found in the
// bucket, which no leader wrote in this cluster; it is often not the
// partition's leader, so the controller's leadership fence must not apply.
// A restore registers only segments the image does not know, each with
// its own description; the partition's leader then starts its log after
// them (tiering.Uploader.Lead).
func RestoreRecords(m Manifest, brokerID int32, now int64) []metadata.RemoteSegmentRecord {
	var out []metadata.RemoteSegmentRecord
	for _, s := range m.Segments {
		if s.State != StateCopyFinished {
			continue
		}
		eps := make([]metadata.EpochStart, len(s.LeaderEpochs))
		for i, e := range s.LeaderEpochs {
			eps[i] = metadata.EpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset}
		}
		rec := metadata.RemoteSegmentRecord{
			SegmentID: s.SegmentID, TopicID: m.TopicID, Partition: m.Partition,
			BaseOffset: s.BaseOffset, EndOffset: s.EndOffset, MaxTimestamp: s.MaxTimestamp,
			LeaderEpochs: eps, SizeBytes: s.SizeBytes,
			State: metadata.CopyStarted, BrokerID: brokerID, EventTimestamp: now,
			WriterLeaderEpoch: metadata.UnknownLeaderEpoch,
		}
		out = append(out, rec)
		fin := rec
		fin.LeaderEpochs = slices.Clone(eps)
		fin.State = metadata.CopyFinished
		out = append(out, fin)
	}
	return out
}
