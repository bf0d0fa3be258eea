package storage

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-io/strata/storage/vfs"
)

// On-disk layout of one data directory (a [Manager] owns it):
//
//	<data dir>/                             one of log.dirs (each laid out alike)
//	  .lock                                 flock'd by the process using the dir: "pid=<pid>"
//	  .kafka_cleanshutdown                  written by Manager.Close ({"version":0,"broker_epoch":N}), removed after load
//	  meta.properties                       first data dir only: cluster.id, node.id, incarnation.id (datadir.go)
//	  producer-id-block                     first data dir only: "next=<end of the reserved block>\n"
//	  recovery-point-offset-checkpoint      "0\n<count>\n<topic> <partition> <offset>\n..."
//	  log-start-offset-checkpoint           same format
//	  replication-offset-checkpoint         same format: high watermarks (replica.high.watermark.checkpoint.interval.ms, close)
//	  cleaner-offset-checkpoint             same format: first dirty offset of compacted logs
//	  <topic>-<partition>/                  one [Log]
//	    00000000000000000000.log            record batches (v2) exactly as on the wire
//	    00000000000000000000.index          sparse offset index, mmap'd (see storage/index)
//	    00000000000000000000.timeindex      sparse time index, mmap'd
//	    00000000000000012345.snapshot       producer state at offset 12345 (taken at roll)
//	    00000000000000000000.txnindex       aborted transactions whose ABORT marker is in the segment (txnindex.go)
//	    00000000000000012345.txnsnapshot    open transactions at offset 12345 (txn.go; once the log saw one)
//	    leader-epoch-checkpoint             epoch -> start offset
//	    partition.metadata                  "version: 0\ntopic_id: <base64>\n" (datadir.go; the broker decides it)
//	    *.deleted                           removed by retention or compaction, closed and unlinked later
//	    *.cleaned, *.swap                   compaction output being swapped in (cleaner.go)
//	  <topic>-<partition>.<uuid>-delete/    a deleted log, removed in the background
//	  __cluster_metadata-0/                 the controller's Raft log when metadata.log.dir
//	                                        is this directory: never loaded as a partition
//
// A segment is named by its base offset: the offset of its first batch, or
// the log end offset when it was rolled. Files change state only by
// renaming (<name>.tmp -> <name>, <name> -> <name>.deleted); every leftover
// of an interrupted rename is removed by one function, cleanLeftovers.

// File suffixes and names.
const (
	// LogFileSuffix names a segment's record batches.
	LogFileSuffix = ".log"
	// IndexFileSuffix names a segment's sparse offset index.
	IndexFileSuffix = ".index"
	// TimeIndexFileSuffix names a segment's sparse time index.
	TimeIndexFileSuffix = ".timeindex"
	// SnapshotFileSuffix names a producer-state snapshot.
	SnapshotFileSuffix = ".snapshot"
	// TxnIndexFileSuffix names a segment's aborted-transaction index
	// (txnindex.go): one 34-byte entry per ABORT marker in the segment.
	TxnIndexFileSuffix = ".txnindex"
	// TxnSnapshotFileSuffix names a transaction-state snapshot
	// (producer.Txns.Snapshot), written at each roll and clean close once
	// the log has seen a transactional batch (txn.go).
	TxnSnapshotFileSuffix = ".txnsnapshot"
	// DeletedFileSuffix marks a file scheduled for removal.
	DeletedFileSuffix = ".deleted"
	// CleanedFileSuffix marks a compaction output not yet swapped in.
	CleanedFileSuffix = ".cleaned"
	// SwapFileSuffix marks a compaction output being swapped in.
	SwapFileSuffix = ".swap"
	// TmpFileSuffix marks a file being written before its atomic rename
	// (vfs.WriteFileAtomic).
	TmpFileSuffix = vfs.AtomicTmpSuffix
	// LockFile, in every data directory (and the metadata directory), is
	// held locked (flock) by the process using it; it holds "pid=<pid>".
	LockFile = ".lock"
	// CleanShutdownFile is the marker, in the data directory, that every
	// log was flushed and closed; it records the broker epoch of the
	// registration that shut down (WriteCleanShutdown, KIP-966).
	CleanShutdownFile = ".kafka_cleanshutdown"
	// RecoveryPointCheckpointFile holds each log's recovery point.
	RecoveryPointCheckpointFile = "recovery-point-offset-checkpoint"
	// ReplicationOffsetCheckpointFile holds each log's high watermark as
	// the broker last published it (Kafka's replication-offset-checkpoint):
	// where a restarted replica's high watermark starts.
	ReplicationOffsetCheckpointFile = "replication-offset-checkpoint"
	// LogStartOffsetCheckpointFile holds each log's start offset.
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	// CleanerCheckpointFile holds each compacted log's first dirty offset
	// (where the next cleaning starts).
	CleanerCheckpointFile = "cleaner-offset-checkpoint"
	// LeaderEpochCheckpointFile holds a log's leader-epoch cache.
	LeaderEpochCheckpointFile = "leader-epoch-checkpoint"
	// PartitionMetadataFile holds a log's topic id (datadir.go).
	PartitionMetadataFile = "partition.metadata"
	// MetaPropertiesFile, in the first data directory, holds the node's
	// cluster id, node id and incarnation id (datadir.go).
	MetaPropertiesFile = "meta.properties"
	// ProducerIDBlockFile, in the first data directory, holds the end of
	// the node's last reserved block of producer ids (datadir.go).
	ProducerIDBlockFile = "producer-id-block"
	// DeleteDirSuffix ends the name of a log directory being removed.
	DeleteDirSuffix = "-delete"
	// StrayDirSuffix ends the name of a log directory the metadata does
	// not account for (Kafka's "-stray"): set aside, never loaded and never
	// removed, for the operator to inspect, restore or delete.
	StrayDirSuffix = "-stray"
	// MetadataTopic is the name of the controller's metadata log. Its
	// directory (__cluster_metadata-0, the Raft WAL) may share a data
	// directory with partition logs, as in Kafka's combined mode, and is
	// never loaded, created or deleted as one (Kafka's LogManager skips it
	// too).
	MetadataTopic = "__cluster_metadata"
)

// SegmentFileName returns the file name of the segment starting at
// baseOffset with the given suffix: the offset zero-padded to 20 digits.
func SegmentFileName(baseOffset int64, suffix string) string {
	return fmt.Sprintf("%020d%s", baseOffset, suffix)
}

// parseSegmentFileName splits "00000000000000000042.log" into 42 and
// ".log". ok is false for names that are not a 20-digit offset followed by
// a suffix.
func parseSegmentFileName(name string) (base int64, suffix string, ok bool) {
	if len(name) < 21 || name[20] != '.' {
		return 0, "", false
	}
	n, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, name[20:], true
}

// LogDirName returns the directory name of a partition's log.
func LogDirName(topic string, partition int32) string {
	return topic + "-" + strconv.FormatInt(int64(partition), 10)
}

// ParseLogDirName splits "<topic>-<partition>" at the last '-'. Topic names
// may themselves contain '-' and '.'.
func ParseLogDirName(name string) (topic string, partition int32, ok bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return "", 0, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 {
		return "", 0, false
	}
	return name[:i], int32(p), true
}
