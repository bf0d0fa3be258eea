package group

// State is a classic group's state, with Kafka's names (GroupState.scala).
//
//	                +-----------------------------------------------+
//	                |                                               |
//	Empty --join--> PreparingRebalance --all joined or--> CompletingRebalance
//	  ^               ^    ^               rebalance timeout   |      |
//	  |               |    |                                   |      | leader's
//	  | no members    |    +---- member joins, leaves, --------+      | SyncGroup
//	  | left after    |          expires, changes metadata            | stored
//	  | the join      |                                               v
//	  +---------------+-------- member joins, leaves, expires ----- Stable
//
//	Empty --DeleteGroups / offsets expired--> Dead (removed from memory)
//	any   --partition resigned--------------> Dead
type State int8

// The group states.
const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// String returns Kafka's name of the state (DescribeGroups, ListGroups).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// canRebalance reports whether a rebalance may start from s (Kafka's
// validPreviousStates of PreparingRebalance).
func (s State) canRebalance() bool {
	return s == Empty || s == CompletingRebalance || s == Stable
}

// PartitionState is what this broker knows of one __consumer_offsets
// partition, set by the broker through [Coordinator.SetPartitionState].
type PartitionState int8

// The partition states. NotOwned is the zero value: a partition this
// broker was never told about is not its to coordinate.
const (
	// NotOwned: groups of the partition get NOT_COORDINATOR.
	NotOwned PartitionState = iota
	// Loading: the partition is being replayed; its groups get
	// COORDINATOR_LOAD_IN_PROGRESS.
	Loading
	// Loaded: the partition is served.
	Loaded
)

// PartitionFor returns the __consumer_offsets partition of group, as Kafka
// computes it: Utils.abs(groupId.hashCode) % numPartitions, where hashCode
// is Java's String.hashCode over UTF-16 code units and Utils.abs masks the
// sign bit (so MinInt32 maps to 0, not to a negative number).
func PartitionFor(group string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return 0
	}
	var h int32
	for _, r := range group {
		if r >= 0x10000 { // a surrogate pair in UTF-16
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return (h & 0x7fffffff) % numPartitions
}
