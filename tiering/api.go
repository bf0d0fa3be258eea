package tiering

// The contract between the broker and the tiering layer's two halves: the
// uploader (the write side: copy, remote retention, orphans, deleted
// topics) and the reader (fetches and timestamp lookups below the local
// log start). The broker builds one of each per node when
// remote.log.storage.system.enable is true, feeds the uploader the
// partitions it leads with remote.storage.enable=true, and asks the reader
// for offsets below a partition's local log start.

import (
	"context"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
)

// Partition names a partition together with its topic's id, which every
// object key carries.
type Partition struct {
	Topic   string
	TopicID uuid.UUID
	Index   int32
}

// RemoteSegment is one COPY_FINISHED segment of the remote tier, as the
// reader reads it.
type RemoteSegment struct {
	Partition
	SegmentID    uuid.UUID
	BaseOffset   int64
	EndOffset    int64 // inclusive
	MaxTimestamp int64 // unix ms, -1 if none
	SizeBytes    int64 // of the .log object
}

// Key returns the object key of the segment's file with extension ext.
func (s RemoteSegment) Key(prefix, ext string) string {
	return SegmentKey(prefix, s.Topic, s.TopicID, s.Index, s.BaseOffset, s.SegmentID, ext)
}

// FromInfo turns the controller's description of a segment into a
// RemoteSegment of topic name topic.
func FromInfo(topic string, s metadata.RemoteSegmentInfo) RemoteSegment {
	return RemoteSegment{
		Partition: Partition{Topic: topic, TopicID: s.TopicID, Index: s.Partition},
		SegmentID: s.SegmentID, BaseOffset: s.BaseOffset, EndOffset: s.EndOffset,
		MaxTimestamp: s.MaxTimestamp, SizeBytes: s.SizeBytes,
	}
}

// Metadata is the tiering layer's view of the controller: the broker's
// replica of the committed metadata image, and the way to change it.
type Metadata interface {
	// RemoteSegments returns a partition's remote segments in every
	// state, sorted by base offset (metadata.State.RemoteSegments).
	RemoteSegments(topicID uuid.UUID, partition int32) []metadata.RemoteSegmentInfo
	// RemotePartitions lists every partition that has remote segments,
	// deleted topics' included.
	RemotePartitions() []metadata.TopicPartition
	// TopicName returns the name of a topic by id, and whether the topic
	// still exists. A deleted topic's name stays known while it has remote
	// segments (so its objects can be found and deleted).
	TopicName(id uuid.UUID) (name string, exists bool, known bool)
	// TopicConfigs returns the topic's own configs (not broker defaults),
	// which the manifest keeps so a restore recreates the topic as it was.
	TopicConfigs(name string) map[string]string
	// CommitRemoteSegment records a state change in the controller. It
	// returns once the change is committed and visible through
	// RemoteSegments. Safe to retry (states are idempotent). The
	// controller fences rec's writer (rec.BrokerID, rec.WriterLeaderEpoch):
	// kerr.FencedLeaderEpoch or kerr.NotLeaderForPartition when it no
	// longer leads the partition in that epoch.
	CommitRemoteSegment(ctx context.Context, rec metadata.RemoteSegmentRecord) error
	// Janitor reports whether this broker deletes the remote data of
	// deleted topics (exactly one live broker does: the lowest id).
	Janitor() bool
}

// LeaderPartition is a partition this broker leads, with
// remote.storage.enable=true: the uploader copies its sealed segments that
// lie wholly below HighWatermark and applies remote retention to it.
type LeaderPartition struct {
	Partition
	Log           Log // *storage.Log in the broker (log.go)
	HighWatermark func() int64
	LeaderEpoch   func() int32
}

// PartitionStatus is what `strata tier status` and the tiering metrics
// show of one partition. Offsets are -1 when there is no such data.
type PartitionStatus struct {
	Partition
	LogStart          int64 // the whole log's start (remote start when there is remote data)
	LocalStart        int64
	LogEnd            int64 // next offset to be written
	RemoteStart       int64 // first offset of the first COPY_FINISHED segment
	RemoteEnd         int64 // last offset (inclusive) of the last COPY_FINISHED segment
	LocalBytes        int64
	RemoteBytes       int64 // .log bytes of COPY_FINISHED segments
	RemoteSegments    int
	UploadLagBytes    int64 // sealed, committed local bytes not yet uploaded
	UploadLagSegments int
}

// Metric names of the tiering layer (the objstore layer adds
// strata_objstore_*). Dashboards and alerts name these; tests keep them
// honest (dashboards/).
const (
	MetricUploadLagBytes        = "strata_tiering_upload_lag_bytes"     // gauge {topic}
	MetricUploadLagSegments     = "strata_tiering_upload_lag_segments"  // gauge {topic}
	MetricLocalBytes            = "strata_tiering_local_bytes"          // gauge {topic}
	MetricRemoteBytes           = "strata_tiering_remote_bytes"         // gauge {topic}
	MetricRemoteSegments        = "strata_tiering_remote_segments"      // gauge {topic}
	MetricUploadedBytes         = "strata_tiering_uploaded_bytes_total" // counter
	MetricUploadedSegments      = "strata_tiering_uploaded_segments_total"
	MetricUploadErrors          = "strata_tiering_upload_errors_total"
	MetricUploadSeconds         = "strata_tiering_upload_seconds" // histogram, one segment's copy
	MetricRemoteDeletedSegs     = "strata_tiering_remote_deleted_segments_total"
	MetricOrphansDeleted        = "strata_tiering_orphan_segments_deleted_total"
	MetricRemoteReadBytes       = "strata_tiering_remote_read_bytes_total"       // bytes returned to fetches
	MetricRemoteReads           = "strata_tiering_remote_reads_total"            // {result="ok|error|timeout"}
	MetricRemoteReadSeconds     = "strata_tiering_remote_read_seconds"           // histogram
	MetricCacheHits             = "strata_tiering_cache_hits_total"              // chunk cache
	MetricCacheMisses           = "strata_tiering_cache_misses_total"            //
	MetricCacheBytes            = "strata_tiering_cache_bytes"                   // gauge
	MetricCacheEvictions        = "strata_tiering_cache_evictions_total"         //
	MetricReadAheadChunks       = "strata_tiering_readahead_chunks_total"        //
	MetricReadQueueWaitSeconds  = "strata_tiering_read_queue_wait_seconds"       // histogram: time a read waited for the budget
	MetricIndexCacheHits        = "strata_tiering_index_cache_hits_total"        //
	MetricIndexCacheMisses      = "strata_tiering_index_cache_misses_total"      //
	MetricRemoteMissingSegments = "strata_tiering_remote_missing_segments_total" // segments found with objects missing
	// The reader's object-store GETs and the bytes they fetched (GETs per
	// GiB read: gets over remote_read_bytes), and read-ahead chunks the
	// cache evicted before any fetch read them.
	MetricRemoteGets      = "strata_tiering_remote_gets_total"
	MetricRemoteGetBytes  = "strata_tiering_remote_get_bytes_total"
	MetricReadAheadWasted = "strata_tiering_readahead_wasted_chunks_total"
)
