// Package sharegroup is the deterministic core of KIP-932's share groups'
// membership (ShareGroupHeartbeat 76, ShareGroupDescribe 77): the group
// state machine of Kafka's GroupMetadataManager for share groups
// ([Group.Heartbeat], [Group.Expire], [Group.MetadataChanged]), the
// server-side assignor ([Simple], Kafka's SimpleAssignor: a partition may
// go to several members), and the __consumer_offsets records 10-15 that
// make a group durable ([EncodeRecord], [DecodeRecord], [Replay]).
//
// It owns membership only: who is in the group, at which epoch, with
// which partitions. The records themselves (acquisition, acknowledgement)
// are broker/share's; the share state of a partition lives in
// __share_group_state. No goroutines, no clock, no I/O: time is a
// millisecond argument, deadlines come back from [Group.NextDeadline],
// and each call returns the records the caller appends (and commits)
// before it answers. The shell is broker/share_groups.go.
//
// Unlike a KIP-848 consumer group there is no revocation: a member's
// epoch and assignment move to the target as soon as it heartbeats.
//
// Usage (the handler, abridged):
//
//	g := sharegroup.NewGroup("queue", sharegroup.DefaultConfig())
//	res := g.Heartbeat(nowMs, req, sharegroup.Client{ID: clientID, Host: host}, image)
//	persist(res.Records) // then reply res.Response
//	if at, ok := g.NextDeadline(); ok { timer.Reset(at - nowMs) }
//	// on the timer: persist(g.Expire(nowMs, image))
package sharegroup
