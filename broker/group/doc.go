// Package group is the consumer-group coordinator: Kafka's classic group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
// ListGroups, DeleteGroups) as a state machine over the groups of the
// __consumer_offsets partitions this broker leads, and (persist.go,
// offsets.go, load.go) the records that make groups and committed offsets
// durable in that topic. Transactional offset commits (KIP-447) are held
// pending per producer by the [Store] until the producer's marker on the
// partition commits or aborts them ([Store.CommitTxn],
// [Store.CompleteTxn]); the [Loader] replays them the same way.
//
// It owns group membership: states (Empty, PreparingRebalance,
// CompletingRebalance, Stable, Dead, see [State]), generations, member ids
// (KIP-394 two-step join), static membership (KIP-345), protocol
// selection, session, rebalance and initial-delay timers. It never
// touches the network or a log directly: requests come decoded (kmsg) from
// the broker's handlers, and durability goes through the [Persister] the
// broker supplies. Assignment is the clients' business (range,
// roundrobin, sticky, cooperative-sticky run in the group leader); the
// coordinator carries protocol metadata and assignments as opaque bytes.
//
// Usage (the broker's wiring, abridged):
//
//	c := group.NewCoordinator(group.Options{Persister: p, Partitions: 50})
//	defer c.Close()
//	c.SetPartitionState(7, group.Loading)
//	// ... replay partition 7, calling c.LoadGroup(7, snapshot) per group ...
//	c.SetPartitionState(7, group.Loaded)
//	resp := c.JoinGroup(group.WithClient(ctx, clientID, host), req) // blocks
//
// Time comes from a [Clock]; tests drive a fake one to run rebalances and
// session expiries deterministically.
package group
