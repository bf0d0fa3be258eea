// Package consumer is the deterministic core of KIP-848's consumer groups
// (the "consumer" group protocol, ConsumerGroupHeartbeat): the server-side
// assignors ([Uniform], [Range]), the group state machine with the
// per-member reconciliation of Kafka's GroupMetadataManager, ConsumerGroup
// and CurrentAssignmentBuilder ([Group.Heartbeat], [Group.Expire]), and
// the __consumer_offsets records that make a group durable (record keys
// 3-8, [EncodeRecord], [DecodeRecord]) with the [Replay] that rebuilds a
// group from them.
//
// It owns decisions only: no goroutines, no clock, no I/O. Time is a
// millisecond argument; deadlines (session and rebalance timeouts) come
// back from [Group.NextDeadline] for the caller's timer, which calls
// [Group.Expire] when one passes. Topic metadata comes from the caller
// (the broker's metadata image, resolved to a [TopicImage]) on every call
// that may need it. Each call returns the records to persist, in order;
// the caller appends them to the group's __consumer_offsets partition and
// answers the client only once they are durable (as Kafka's coordinator
// runtime does). The broker's shell is broker/consumer_groups.go (with the
// handlers 68_consumer_group_heartbeat.go and 69_consumer_group_describe.go).
//
// Usage (the future handler, abridged):
//
//	g := consumer.NewGroup("orders-etl", consumer.DefaultConfig())
//	res := g.Heartbeat(nowMs, req, consumer.Client{ID: clientID, Host: host}, image)
//	persist(res.Records) // then reply res.Response
//	if at, ok := g.NextDeadline(); ok { timer.Reset(at - nowMs) }
//	// on the timer: persist(g.Expire(nowMs, image))
package consumer
