package broker

// The leader's half of replication: the state of each follower (LEO, last
// caught-up time, broker epoch), the high watermark as the ISR's minimum
// LEO, ISR shrink and expand through AlterPartition, and acks=all.

// makeLeader makes p led by this broker in w's leader epoch. reconcile
// calls it for every partition the image says this broker leads, on every
// delta, so it must be cheap and idempotent when nothing changed.
func (n *Node) makeLeader(p *partition, w wantedPartition) {
	n.stopFollowing(p)
	p.leaderEpoch.Store(w.epoch)
	p.leader.Store(true)
}
