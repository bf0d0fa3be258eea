// Package share is the deterministic core of KIP-932 share groups on a
// share-partition's leader: the in-flight records of one (group, topic,
// partition) with their delivery states (available, acquired,
// acknowledged, archived), acquisition locks, delivery counts and the
// share-partition start offset (SPSO), as Kafka's SharePartition keeps
// them; the initial SPSO from share.auto.offset.reset; and the durable
// form of that state, Kafka's __share_group_state records (ShareSnapshot
// and ShareUpdate), with their codec, replay, and the journal's last
// redundant offset that the coordinator prunes the topic to (the updates
// are deltas under one key per share-partition: the topic is never
// compacted).
//
// It does no I/O and starts no goroutine: the caller passes the current
// time in milliseconds to every call (locks expire when the caller's clock
// passes their deadline, see [Partition.NextDeadline]), reads the log
// itself and hands the fetched batch boundaries to [Partition.Acquire],
// and writes the updates [Partition.TakeUpdate] returns. It does not own
// share-group membership, share sessions, the ShareFetch/ShareAcknowledge
// handlers or the share coordinator's topic: the broker drives it
// (broker/share_leader.go, share_coordinator.go; see DESIGN.md).
//
// Usage:
//
//	p := share.New(share.DefaultConfig(), 0)
//	got := p.Acquire("member-1", []share.Batch{{First: 0, Last: 9}}, 500, share.BatchOptimized, now)
//	err := p.Acknowledge("member-1", []share.AckBatch{{First: 0, Last: 9, Types: []share.AckType{share.AckAccept}}}, now)
//	if u, ok := p.TakeUpdate(); ok { /* WriteShareGroupState(u) */ }
//
// Not safe for concurrent use: one partition is driven by one goroutine
// (or under its lock).
package share
