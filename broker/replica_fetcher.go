package broker

// The follower's half of replication: one fetcher loop per source broker
// fetching the partitions this broker follows from their leaders,
// appending the leader's batches as they are, truncating by leader epoch.

// makeFollower makes p followed by this broker, led by w.leaderID (or
// offline) in w's leader epoch. reconcile calls it for every partition of
// the image this broker replicates without leading, on every delta, so it
// must be cheap and idempotent when nothing changed.
func (n *Node) makeFollower(p *partition, w wantedPartition) {
	p.leaderEpoch.Store(w.epoch)
	p.leader.Store(false)
}

// stopFollowing stops fetching p (it is led here now, or dropped).
func (n *Node) stopFollowing(p *partition) {}
