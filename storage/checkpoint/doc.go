// Package checkpoint reads and writes the small text files in which a data
// directory and its partitions remember what they cannot cheaply recompute:
// per-partition offsets (recovery-point-offset-checkpoint,
// log-start-offset-checkpoint) and each partition's leader epochs
// (leader-epoch-checkpoint, through [LeaderEpochCache]). The formats are
// Kafka's, byte for byte, so a directory written by one can be read by the
// other.
//
// checkpoint owns those formats; the files are replaced atomically through
// [vfs.WriteFileAtomic], the one helper every small data-directory file uses:
// write <name>.tmp, sync it, rename it over <name>, sync the directory, so
// a crash leaves either the old file or the new one, never a mix. It never
// decides what the offsets are: the storage manager and logs do.
//
// Reading a file that is not in the format returns an error wrapping
// [ErrCorruptCheckpoint]; it never panics. A missing file reads as empty.
//
// Usage:
//
//	err := checkpoint.WriteOffsets(fs, dir+"/recovery-point-offset-checkpoint",
//		map[checkpoint.TopicPartition]int64{{Topic: "orders", Partition: 0}: 1234})
//	m, err := checkpoint.ReadOffsets(fs, dir+"/recovery-point-offset-checkpoint")
//
//	c, err := checkpoint.OpenLeaderEpochCache(fs, partDir+"/leader-epoch-checkpoint")
//	err = c.Assign(3, 1234)              // epoch 3 starts at offset 1234
//	epoch, end := c.EndOffsetFor(2, leo) // OffsetForLeaderEpoch
package checkpoint
