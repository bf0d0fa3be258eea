package fdlimit

// Limit is the open-file limit before and after Raise.
type Limit struct {
	Was  uint64 // soft limit found at start
	Soft uint64 // soft limit now (the hard one, if raising worked)
	Hard uint64
}

// DescriptorsPerPartition is what one partition's log holds open: the
// active segment's .log and its two mapped indexes. Sealed segments hold
// theirs only while they are in the storage file cache.
const DescriptorsPerPartition = 3

// Budget divides a limit between what the node needs anyway (listeners,
// client connections, the Raft log, checkpoints, uploads, compaction),
// the cache of open sealed segments and the partitions' active segments.
type Budget struct {
	Limit          uint64 // the soft limit it was planned from; 0: unlimited
	Reserved       int    // descriptors kept for everything else
	SealedSegments int    // storage.ManagerOptions.MaxOpenSealedSegments
	Partitions     int    // partitions whose active segments fit; 0 with Limit 0
}

// Plan makes the budget of a soft limit (0 or above 1<<31: unlimited).
//
// Reserved: 64 plus an eighth of the limit, at most 4,096 (a few hundred
// connections and transient files; a node whose limit is 256 keeps 96).
// Sealed segments: an eighth of the rest, at least 4, with three
// descriptors each. Partitions: what is left, three each. At 256 that is
// 96 reserved, 6 sealed segments, 47 partitions; at 1,024, 192, 34 and
// 243; at 1,048,576, 4,096 reserved, 43,520 sealed segments and 304,640
// partitions.
func Plan(soft uint64) Budget {
	if soft == 0 || soft > 1<<31 {
		return Budget{}
	}
	lim := int(soft)
	b := Budget{Limit: soft, Reserved: min(64+lim/8, 4096)}
	rest := max(lim-b.Reserved, 0)
	b.SealedSegments = max(rest/8/DescriptorsPerPartition, 4)
	b.Partitions = max(rest-b.SealedSegments*DescriptorsPerPartition, 0) / DescriptorsPerPartition
	return b
}
