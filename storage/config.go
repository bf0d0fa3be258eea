package storage

import (
	"math"
	"strings"

	"github.com/strata-io/strata/internal/batch"
)

// Config is one log's (one topic's) configuration. Field comments give the
// Kafka topic config each field stands for; [DefaultConfig] returns Kafka's
// defaults.
type Config struct {
	SegmentBytes         int64               // segment.bytes (1 GiB); capped at math.MaxInt32 (index positions are 4 bytes)
	SegmentMs            int64               // segment.ms (7 days)
	SegmentJitterMs      int64               // segment.jitter.ms (0)
	SegmentIndexBytes    int                 // segment.index.bytes (10 MiB)
	IndexIntervalBytes   int                 // index.interval.bytes (4096)
	MaxMessageBytes      int                 // max.message.bytes (1048588): whole batch size
	FlushMessages        int64               // flush.messages (math.MaxInt64 = never forced)
	FlushMs              int64               // flush.ms (math.MaxInt64 = never forced)
	RetentionMs          int64               // retention.ms (7 days; -1 = forever)
	RetentionBytes       int64               // retention.bytes (-1 = unlimited)
	LocalRetentionMs     int64               // local.retention.ms (-2 = same as retention.ms)
	LocalRetentionBytes  int64               // local.retention.bytes (-2 = same as retention.bytes)
	RemoteStorageEnable  bool                // remote.storage.enable (false)
	TimestampType        batch.TimestampType // message.timestamp.type (CreateTime)
	TimestampBeforeMaxMs int64               // message.timestamp.before.max.ms (math.MaxInt64 = unchecked)
	TimestampAfterMaxMs  int64               // message.timestamp.after.max.ms (math.MaxInt64 = unchecked)
	FileDeleteDelayMs    int64               // file.delete.delay.ms (60000)
	CleanupPolicy        string              // cleanup.policy ("delete", "compact" or "compact,delete"; see Compact, Deletes)
	Preallocate          bool                // preallocate (false): reserved, segment files grow as written

	DeleteRetentionMs      int64   // delete.retention.ms (86400000): how long a tombstone outlives its record's timestamp
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio (0.5)
	MinCompactionLagMs     int64   // min.compaction.lag.ms (0)
	MaxCompactionLagMs     int64   // max.compaction.lag.ms (math.MaxInt64)
}

// Compact reports whether cleanup.policy includes "compact".
func (c Config) Compact() bool { return policyHas(c.CleanupPolicy, "compact") }

// Deletes reports whether cleanup.policy includes "delete" (retention by
// time and size applies); an empty policy means "delete".
func (c Config) Deletes() bool { return c.CleanupPolicy == "" || policyHas(c.CleanupPolicy, "delete") }

// policyHas reports whether the comma-separated policy list holds p.
func policyHas(list, p string) bool {
	for _, f := range strings.Split(list, ",") {
		if strings.TrimSpace(f) == p {
			return true
		}
	}
	return false
}

// DefaultConfig returns Kafka's topic defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:         1 << 30,
		SegmentMs:            7 * 24 * 3600 * 1000,
		SegmentIndexBytes:    10 << 20,
		IndexIntervalBytes:   4096,
		MaxMessageBytes:      1048588,
		FlushMessages:        math.MaxInt64,
		FlushMs:              math.MaxInt64,
		RetentionMs:          7 * 24 * 3600 * 1000,
		RetentionBytes:       -1,
		LocalRetentionMs:     -2,
		LocalRetentionBytes:  -2,
		TimestampType:        batch.TimestampType(0),
		TimestampBeforeMaxMs: math.MaxInt64,
		TimestampAfterMaxMs:  math.MaxInt64,
		FileDeleteDelayMs:    60000,
		CleanupPolicy:        "delete",

		DeleteRetentionMs:      86400000,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLagMs:     math.MaxInt64,
	}
}

// normalized fills zero values with defaults and clamps what the file
// formats cannot hold, so a hand-built Config is always usable.
func (c Config) normalized() Config {
	d := DefaultConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentBytes > math.MaxInt32 {
		c.SegmentBytes = math.MaxInt32
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.SegmentJitterMs < 0 {
		c.SegmentJitterMs = 0
	}
	if c.SegmentIndexBytes <= 0 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.SegmentIndexBytes < 12 {
		c.SegmentIndexBytes = 12 // room for at least one entry of each index
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = 0
	}
	if c.FlushMessages <= 0 {
		c.FlushMessages = d.FlushMessages
	}
	if c.FlushMs <= 0 {
		c.FlushMs = d.FlushMs
	}
	if c.FileDeleteDelayMs < 0 {
		c.FileDeleteDelayMs = 0
	}
	if c.CleanupPolicy == "" {
		c.CleanupPolicy = d.CleanupPolicy
	}
	if c.DeleteRetentionMs < 0 {
		c.DeleteRetentionMs = 0
	}
	if c.MinCleanableDirtyRatio <= 0 && c.MaxCompactionLagMs == 0 && c.DeleteRetentionMs == 0 && c.MinCompactionLagMs == 0 {
		// A hand-built Config that never set the compaction fields.
		c.DeleteRetentionMs, c.MinCleanableDirtyRatio, c.MaxCompactionLagMs = d.DeleteRetentionMs, d.MinCleanableDirtyRatio, d.MaxCompactionLagMs
	}
	if c.MaxCompactionLagMs <= 0 {
		c.MaxCompactionLagMs = d.MaxCompactionLagMs
	}
	if c.MinCompactionLagMs < 0 {
		c.MinCompactionLagMs = 0
	}
	return c
}

// localRetention returns the retention limits that drive local deletion.
func (c Config) localRetention() (ms, bytes int64) {
	ms, bytes = c.RetentionMs, c.RetentionBytes
	if c.RemoteStorageEnable {
		if c.LocalRetentionMs != -2 {
			ms = c.LocalRetentionMs
		}
		if c.LocalRetentionBytes != -2 {
			bytes = c.LocalRetentionBytes
		}
	}
	return ms, bytes
}

// batchLimits turns the config into the validator's limits at time now.
func (c Config) batchLimits(nowMs int64) batch.Limits {
	lim := batch.Limits{
		MaxBatchBytes:        c.MaxMessageBytes,
		Now:                  nowMs,
		TimestampBeforeMaxMs: c.TimestampBeforeMaxMs,
		TimestampAfterMaxMs:  c.TimestampAfterMaxMs,
		SkipTimestampCheck:   c.TimestampType == logAppendTime,
	}
	if lim.TimestampBeforeMaxMs == math.MaxInt64 {
		lim.TimestampBeforeMaxMs = -1
	}
	if lim.TimestampAfterMaxMs == math.MaxInt64 {
		lim.TimestampAfterMaxMs = -1
	}
	return lim
}

const logAppendTime = batch.TimestampType(1)
