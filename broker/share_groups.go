package broker

// KIP-932 share groups' membership on the node: the deterministic core is
// broker/group/sharegroup; this file is its shell, built as
// consumer_groups.go is for KIP-848 groups. One shareGroup per group id
// of a __consumer_offsets partition this broker leads and has loaded,
// holding the core's Group behind a mutex that serialises its calls and
// the appends of their records (records 10-15, acks=all, before the
// answer; a failed append replays the group from what the log holds).
// Session timeouts are one timer per group on NextDeadline calling
// Expire; a load replays the partition's records 10-15
// (group.Loader.ShareRecords); losing the partition drops its groups.
//
// Share groups share the group id namespace with classic and consumer
// groups, as Kafka: a share heartbeat for a group of another type is
// GROUP_ID_NOT_FOUND ("Group %s is not a share group."); a consumer
// heartbeat or a JoinGroup for a share group is refused the same way
// (consumer_groups.go, 11_join_group.go).
//
// The share state of the group's partitions (in __share_group_state) is
// the share-partition leaders' (S19c) and the share coordinator's
// (S19d): DeleteGroups of an empty share group deletes it through the
// node's share.Persister for every partition the group was ever assigned
// (the group's type 15 record), then tombstones the group's records.

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/broker/group/sharegroup"
	"github.com/strata-io/strata/broker/share"
)

// shareGroups is the node's share group coordinator (membership). Its
// methods are safe for concurrent use.
type shareGroups struct {
	gc  *groupCoordinator
	cfg sharegroup.Config
	// persister deletes a deleted group's share state (the node's
	// share.Persister; tests swap it).
	persister func() share.Persister

	mu     sync.Mutex // guards groups, closed
	groups map[string]*shareGroup
	closed bool

	kick atomic.Bool // a metadataChanged pass is queued
}

// shareGroup is one group. mu serialises every call into g and the append
// of its records.
type shareGroup struct {
	mu        sync.Mutex
	g         *sharegroup.Group
	partition int32
	hist      []sharegroup.Record // the log's records of the group, compacted by key
	timer     *time.Timer
	gone      bool
}

func newShareGroups(gc *groupCoordinator, cfg sharegroup.Config) *shareGroups {
	sg := &shareGroups{gc: gc, cfg: cfg, groups: map[string]*shareGroup{}}
	mem := share.NewMemPersister()
	sg.persister = func() share.Persister { return shareStatePersister(gc.n, mem) }
	return sg
}

// shareGroupsConfig is the core's configuration from group.share.*.
func (n *Node) shareGroupsConfig() sharegroup.Config {
	cfg := sharegroup.DefaultConfig()
	if n.cfg.GroupShareSessionTimeout > 0 {
		cfg.SessionTimeoutMs = int32(min(n.cfg.GroupShareSessionTimeout.Milliseconds(), 1<<31-1))
	}
	if n.cfg.GroupShareHeartbeatInterval > 0 {
		cfg.HeartbeatIntervalMs = int32(min(n.cfg.GroupShareHeartbeatInterval.Milliseconds(), 1<<31-1))
	}
	if n.cfg.GroupShareMaxSize > 0 {
		cfg.MaxSize = n.cfg.GroupShareMaxSize
	}
	return cfg
}

// shareGroupsOn reports whether share groups (76-79) are offered:
// group.coordinator.rebalance.protocols lists share. The one switch of
// the membership and the share-partition leader.
func (n *Node) shareGroupsOn() bool { return n.cfg.GroupShareProtocol }

func (ss *shareGroups) lookup(id string) *shareGroup {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.groups[id]
}

// exists reports whether id is a share group here, and whether it has
// members.
func (ss *shareGroups) exists(id string) (known, members bool) {
	known = ss.with(id, func(g *sharegroup.Group) { members = len(g.Members) > 0 })
	return known, members
}

// with runs fn on the group under its lock; false if it is not a share
// group here.
func (ss *shareGroups) with(id string, fn func(g *sharegroup.Group)) bool {
	sg := ss.lookup(id)
	if sg == nil {
		return false
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if sg.gone {
		return false
	}
	fn(sg.g)
	return true
}

// otherGroupType is the error for a share request on id when id is a
// group of another type here (nil when it is not).
func (ss *shareGroups) otherGroupType(id string) *kerr.Error {
	if known, _ := ss.gc.cgs.exists(id); known {
		return kerr.GroupIDNotFound
	}
	if st, ok := ss.gc.members.GroupState(id); ok && st != "Dead" {
		return kerr.GroupIDNotFound
	}
	return nil
}

// heartbeat serves one ShareGroupHeartbeat.
func (ss *shareGroups) heartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest, c sharegroup.Client) *kmsg.ShareGroupHeartbeatResponse {
	fail := func(e *kerr.Error, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp := kmsg.NewPtrShareGroupHeartbeatResponse()
		resp.Version = req.Version
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	if code, msg := sharegroup.Validate(req); code != nil {
		return fail(code, msg)
	}
	partition, err := ss.gc.partitionOf(req.GroupID)
	if err != nil {
		return fail(kerr.ErrorForCode(errCode(err)).(*kerr.Error), "")
	}
	session, interval := ss.gc.n.shareGroupTimeouts(req.GroupID) // before sg.mu: metaMu is not taken under it
	for {
		sg, code, msg := ss.getOrCreate(req.GroupID, partition, req.MemberEpoch == sharegroup.JoinEpoch)
		if code != nil {
			return fail(code, msg)
		}
		sg.mu.Lock()
		if sg.gone {
			sg.mu.Unlock()
			if _, err := ss.gc.partitionOf(req.GroupID); err != nil {
				return fail(kerr.ErrorForCode(errCode(err)).(*kerr.Error), "")
			}
			continue // replaced by a reload
		}
		sg.g.SetTimeouts(session, interval)
		res := sg.g.Heartbeat(nowMs(), req, c, ss.gc.cgs.image())
		err := ss.persistLocked(ctx, sg, res.Records)
		if len(sg.hist) == 0 && len(sg.g.Members) == 0 {
			ss.forgetLocked(req.GroupID, sg) // created for a join that failed
		}
		if err != nil {
			sg.mu.Unlock()
			return fail(kerr.ErrorForCode(group.StoreErrorCode(err)).(*kerr.Error), "")
		}
		ss.armLocked(req.GroupID, sg)
		sg.mu.Unlock()
		return res.Response
	}
}

// getOrCreate returns the group, creating an empty one on a join.
func (ss *shareGroups) getOrCreate(id string, partition int32, join bool) (*shareGroup, *kerr.Error, string) {
	if e := ss.otherGroupType(id); e != nil {
		return nil, e, "Group " + id + " is not a share group."
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return nil, kerr.CoordinatorNotAvailable, ""
	}
	if sg := ss.groups[id]; sg != nil {
		return sg, nil, ""
	}
	if !join {
		return nil, kerr.GroupIDNotFound, "Share group " + id + " not found."
	}
	sg := &shareGroup{g: sharegroup.NewGroup(id, ss.cfg), partition: partition}
	ss.groups[id] = sg
	return sg, nil, ""
}

// persistLocked appends recs (sg.mu held) and, on failure, reverts the
// group to its log.
func (ss *shareGroups) persistLocked(ctx context.Context, sg *shareGroup, recs []sharegroup.Record) error {
	if len(recs) == 0 {
		return nil
	}
	kvs := make([]group.KV, len(recs))
	for i, r := range recs {
		kvs[i].Key, kvs[i].Value = sharegroup.EncodeRecord(r)
	}
	sctx, cancel := context.WithTimeout(ctx, ss.gc.n.cfg.OffsetsCommitTimeout+5*time.Second)
	defer cancel()
	if err := ss.gc.store.AppendRecords(sctx, sg.partition, kvs); err != nil {
		ss.gc.n.logger.Warn("broker: share group records not stored", "group", sg.g.ID, "err", err)
		g := sharegroup.Replay(ss.cfg, sg.hist)[sg.g.ID]
		if g == nil {
			g = sharegroup.NewGroup(sg.g.ID, ss.cfg)
		}
		g.Loaded(nowMs())
		sg.g = g
		return err
	}
	sg.hist = append(sg.hist, recs...)
	if len(sg.hist) > 64+8*len(sg.g.Members) {
		sg.hist = compactShareRecords(sg.hist)
	}
	return nil
}

// compactShareRecords keeps the newest record of each key, in the order
// of those newest records (what log compaction keeps), without the members
// that left (all their newest records tombstones), as compactRecords.
func compactShareRecords(recs []sharegroup.Record) []sharegroup.Record {
	last := map[string]int{}
	for i, r := range recs {
		k, _ := sharegroup.EncodeRecord(r)
		last[string(k)] = i
	}
	idx := slices.Sorted(maps.Values(last))
	present := map[string]bool{} // members with a newest record that is not a tombstone
	for _, i := range idx {
		if id, deleted, ok := shareMemberRecord(recs[i]); ok && !deleted {
			present[id] = true
		}
	}
	out := make([]sharegroup.Record, 0, len(idx))
	for _, i := range idx {
		if id, _, ok := shareMemberRecord(recs[i]); ok && !present[id] {
			continue
		}
		out = append(out, recs[i])
	}
	return out
}

// shareMemberRecord returns the member a record is keyed by (types 10, 13
// and 14) and whether it is a tombstone; ok false for the group's own
// records.
func shareMemberRecord(r sharegroup.Record) (member string, deleted, ok bool) {
	switch r := r.(type) {
	case *sharegroup.MemberMetadataRecord:
		return r.MemberID, r.Deleted, true
	case *sharegroup.TargetMemberRecord:
		return r.MemberID, r.Deleted, true
	case *sharegroup.CurrentAssignmentRecord:
		return r.MemberID, r.Deleted, true
	}
	return "", false, false
}

// forgetLocked (sg.mu held) removes the group from memory.
func (ss *shareGroups) forgetLocked(id string, sg *shareGroup) {
	sg.gone = true
	if sg.timer != nil {
		sg.timer.Stop()
	}
	ss.mu.Lock()
	if ss.groups[id] == sg {
		delete(ss.groups, id)
	}
	ss.mu.Unlock()
}

// armLocked (sg.mu held) sets the group's timer to its next deadline.
func (ss *shareGroups) armLocked(id string, sg *shareGroup) {
	if sg.timer != nil {
		sg.timer.Stop()
		sg.timer = nil
	}
	at, ok := sg.g.NextDeadline()
	if !ok || sg.gone {
		return
	}
	d := time.Duration(at-nowMs())*time.Millisecond + time.Millisecond
	sg.timer = time.AfterFunc(max(d, 0), func() { ss.expire(id, sg) })
}

// expire fences the members whose session timed out.
func (ss *shareGroups) expire(id string, sg *shareGroup) {
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if sg.gone {
		return
	}
	at, ok := sg.g.NextDeadline()
	if !ok {
		return
	}
	if now := nowMs(); at <= now {
		if err := ss.persistLocked(context.Background(), sg, sg.g.Expire(now, ss.gc.cgs.image())); err != nil {
			sg.timer = time.AfterFunc(time.Second, func() { ss.expire(id, sg) })
			return
		}
	}
	ss.armLocked(id, sg)
}

// imageChanged queues a metadataChanged pass off the caller's goroutine.
func (ss *shareGroups) imageChanged() {
	if !ss.kick.CompareAndSwap(false, true) {
		return
	}
	go func() {
		ss.kick.Store(false)
		ss.metadataChanged()
	}()
}

// metadataChanged tells every group of the new topic image.
func (ss *shareGroups) metadataChanged() {
	ss.mu.Lock()
	all := slices.Collect(maps.Values(ss.groups))
	ss.mu.Unlock()
	if len(all) == 0 {
		return
	}
	img := ss.gc.cgs.image()
	for _, sg := range all {
		sg.mu.Lock()
		if !sg.gone {
			_ = ss.persistLocked(context.Background(), sg, sg.g.MetadataChanged(img))
		}
		sg.mu.Unlock()
	}
}

// load installs the groups replayed from a partition's records 10-15,
// replacing what the partition had.
func (ss *shareGroups) load(partition int32, recs []sharegroup.Record) []string {
	ss.unload(partition)
	byGroup := map[string][]sharegroup.Record{}
	for _, r := range recs {
		byGroup[r.GroupID()] = append(byGroup[r.GroupID()], r)
	}
	groups := sharegroup.Replay(ss.cfg, recs)
	timeouts := map[string][2]int32{}
	for id := range groups {
		s, i := ss.gc.n.shareGroupTimeouts(id)
		timeouts[id] = [2]int32{s, i}
	}
	now := nowMs()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var names []string
	for id, g := range groups {
		g.SetTimeouts(timeouts[id][0], timeouts[id][1])
		g.Loaded(now)
		sg := &shareGroup{g: g, partition: partition, hist: compactShareRecords(byGroup[id])}
		ss.groups[id] = sg
		sg.mu.Lock()
		ss.armLocked(id, sg)
		sg.mu.Unlock()
		names = append(names, id)
	}
	return names
}

// unload drops the partition's groups.
func (ss *shareGroups) unload(partition int32) {
	ss.mu.Lock()
	var drop []*shareGroup
	for id, sg := range ss.groups {
		if sg.partition == partition {
			drop = append(drop, sg)
			delete(ss.groups, id)
		}
	}
	ss.mu.Unlock()
	for _, sg := range drop {
		sg.mu.Lock()
		sg.gone = true
		if sg.timer != nil {
			sg.timer.Stop()
		}
		sg.mu.Unlock()
	}
}

// close drops every group.
func (ss *shareGroups) close() {
	ss.mu.Lock()
	ss.closed = true
	parts := map[int32]bool{}
	for _, sg := range ss.groups {
		parts[sg.partition] = true
	}
	ss.mu.Unlock()
	for p := range parts {
		ss.unload(p)
	}
}

// list returns the groups' ids and states, for ListGroups.
func (ss *shareGroups) list() map[string]sharegroup.GroupState {
	ss.mu.Lock()
	all := maps.Clone(ss.groups)
	ss.mu.Unlock()
	out := map[string]sharegroup.GroupState{}
	for id, sg := range all {
		sg.mu.Lock()
		if !sg.gone {
			out[id] = sg.g.State()
		}
		sg.mu.Unlock()
	}
	return out
}

// deleteGroup deletes the share group id (DeleteGroups): only an empty one
// (else NON_EMPTY_GROUP); its share state first (Persister.Delete of each
// partition it was assigned), then its records' tombstones. handled is
// false when id is not a share group here.
func (ss *shareGroups) deleteGroup(ctx context.Context, id string) (handled bool, code int16) {
	sg := ss.lookup(id)
	if sg == nil {
		return false, 0
	}
	sg.mu.Lock()
	defer sg.mu.Unlock()
	if sg.gone {
		return false, 0
	}
	recs := sg.g.DeleteRecords()
	if recs == nil {
		return true, kerr.NonEmptyGroup.Code
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ss.gc.n.cfg.OffsetsCommitTimeout+5*time.Second)
	defer cancel()
	p := ss.persister()
	for _, t := range sg.g.Partitions() {
		for _, part := range t.Partitions {
			if err := p.Delete(sctx, share.Key{Group: id, TopicID: t.ID, Partition: part}); err != nil {
				ss.gc.n.logger.Warn("broker: share group state not deleted", "group", id, "topic", t.Name, "partition", part, "err", err)
				return true, errCode(err)
			}
		}
	}
	if err := ss.persistLocked(ctx, sg, recs); err != nil {
		return true, group.StoreErrorCode(err)
	}
	ss.forgetLocked(id, sg)
	return true, 0
}

// shareGroupIsEmpty reports whether group is a share group here and
// whether it has no members (AlterShareGroupOffsets needs an empty one).
func (n *Node) shareGroupIsEmpty(group string) (exists, empty bool) {
	known, members := n.groups.sgs.exists(group)
	return known, known && !members
}

// groupIsShare reports whether id is a share group here.
func (n *Node) groupIsShare(id string) bool {
	known, _ := n.groups.sgs.exists(id)
	return known
}

// listShareGroups adds the share groups to a ListGroups answer (v5+
// TypesFilter "share", v4+ StatesFilter, case-insensitive), sorted by
// name with the others. Kafka lists them with protocol type "share".
func (n *Node) listShareGroups(req *kmsg.ListGroupsRequest, resp *kmsg.ListGroupsResponse) {
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(s string) bool { return strings.EqualFold(s, "share") }) {
		return
	}
	added := false
	for id, st := range n.groups.sgs.list() {
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, string(st)) }) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = id, "share", string(st), "share"
		resp.Groups = append(resp.Groups, g)
		added = true
	}
	if added {
		slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	}
}
