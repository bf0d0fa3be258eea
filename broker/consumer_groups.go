package broker

// KIP-848 consumer groups (the "consumer" rebalance protocol) on the node:
// the deterministic core is broker/group/consumer; this file is its shell.
// One consumerGroup per group id of a __consumer_offsets partition this
// broker leads and has loaded, holding the core's Group behind a mutex
// that serialises its calls and the appends of their records (so records
// reach the log in the order the core produced them).
//
// A call's records are appended to the group's partition through the
// offsets store (the leader append path, acks=all) before the answer is
// sent; a failed append reverts the group to what the log holds (the
// records appended so far, replayed), as Kafka's coordinator runtime
// reverts its snapshot. Session and rebalance timeouts are one timer per
// group on the core's NextDeadline, calling Expire. A load replays the
// partition's records 3-8 (group.Loader.ConsumerRecords) and arms the
// timers (Loaded); losing the partition drops its groups.
//
// Classic and consumer groups share the group id namespace: a joining
// heartbeat for a classic group with members converts it when
// group.consumer.migration.policy allows (else GROUP_ID_NOT_FOUND, Kafka's
// "Group %s is not a consumer group"), and the classic requests of a
// consumer group with members are served by it; a removal leaving only
// classic members converts it back (consumer_migration.go). An Empty
// classic group (offsets only) is taken over.

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/broker/group/consumer"
	"github.com/strata-io/strata/controller/metadata"
)

// consumerGroups is the node's KIP-848 coordinator. Its methods are safe
// for concurrent use.
type consumerGroups struct {
	gc  *groupCoordinator
	cfg consumer.Config

	mu     sync.Mutex // guards groups, img, imgOffset, closed
	groups map[string]*consumerGroup
	img    consumer.TopicImage // cached topic image, of metadata offset imgOffset
	imgOff int64
	closed bool

	kick atomic.Bool // a metadataChanged pass is queued
}

// consumerGroup is one group. mu serialises every call into g and the
// append of its records.
type consumerGroup struct {
	mu        sync.Mutex
	g         *consumer.Group
	partition int32
	// hist is what the log holds for the group (its records appended so
	// far, compacted by key): a failed append replays it.
	hist  []consumer.Record
	timer *time.Timer
	gone  bool // unloaded or replaced: callers retry (NOT_COORDINATOR)
}

func newConsumerGroups(gc *groupCoordinator, cfg consumer.Config) *consumerGroups {
	return &consumerGroups{gc: gc, cfg: cfg, groups: map[string]*consumerGroup{}, imgOff: -1}
}

// image returns the topics of the metadata view as the core sees them,
// cached per metadata offset.
func (cs *consumerGroups) image() consumer.TopicImage {
	var img consumer.TopicImage
	cs.gc.n.view(func(st *metadata.State) {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.img != nil && cs.imgOff == st.Offset() {
			img = cs.img
			return
		}
		racks := map[int32]string{}
		for _, b := range st.Brokers() {
			racks[b.ID] = b.Rack
		}
		img = consumer.TopicImage{}
		for _, t := range st.Topics() {
			ct := consumer.Topic{ID: t.ID, Name: t.Name, Partitions: t.NumPartitions,
				Internal: t.Name == offsetsTopic || t.Name == txnStateTopic || t.Name == shareStateTopic}
			parts := st.Partitions(t.ID)
			hasRack := false
			rs := make([][]string, len(parts))
			for i, p := range parts {
				for _, r := range p.Replicas {
					if rack := racks[r]; rack != "" {
						rs[i] = append(rs[i], rack)
						hasRack = true
					}
				}
			}
			if hasRack {
				ct.Racks = rs
			}
			ct.Partitions = int32(len(parts))
			img[t.Name] = ct
		}
		cs.img, cs.imgOff = img, st.Offset()
	})
	return img
}

// lookup returns the group if known here.
func (cs *consumerGroups) lookup(id string) *consumerGroup {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.groups[id]
}

// exists reports whether id is a consumer group here, and whether it has
// members.
func (cs *consumerGroups) exists(id string) (known, members bool) {
	cg := cs.lookup(id)
	if cg == nil {
		return false, false
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.gone {
		return false, false
	}
	return true, len(cg.g.Members) > 0
}

// heartbeat serves one ConsumerGroupHeartbeat.
func (cs *consumerGroups) heartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, c consumer.Client) *kmsg.ConsumerGroupHeartbeatResponse {
	fail := func(e *kerr.Error, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		resp.Version = req.Version
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	if req.Group == "" {
		return fail(kerr.InvalidRequest, "GroupId can't be empty.")
	}
	partition, err := cs.gc.partitionOf(req.Group)
	if err != nil {
		return fail(kerr.ErrorForCode(errCode(err)).(*kerr.Error), "")
	}
	session, interval := cs.groupTimeouts(req.Group) // before cg.mu: metaMu is not taken under it
	for tries := 0; ; tries++ {
		cg, code, msg := cs.getOrCreate(req.Group, partition, req.MemberEpoch == consumer.JoinEpoch)
		if code == errUpgrade {
			found, code, msg := cs.upgrade(ctx, req.Group, partition)
			if code != nil {
				return fail(code, msg)
			}
			if !found && tries > 3 {
				return fail(kerr.CoordinatorLoadInProgress, "")
			}
			continue // converted (or gone meanwhile): look again
		}
		if code != nil {
			return fail(code, msg)
		}
		cg.mu.Lock()
		if cg.gone {
			cg.mu.Unlock()
			if _, err := cs.gc.partitionOf(req.Group); err != nil {
				return fail(kerr.ErrorForCode(errCode(err)).(*kerr.Error), "")
			}
			continue // replaced by a reload: use the new one
		}
		cg.g.SetTimeouts(session, interval)
		epoch := cg.g.Epoch
		res := cg.g.Heartbeat(nowMs(), req, c, cs.image())
		downgraded, err := cs.commitLocked(ctx, req.Group, cg, epoch, res.Records)
		if downgraded {
			cg.mu.Unlock()
			return res.Response
		}
		if len(cg.hist) == 0 && len(cg.g.Members) == 0 {
			// A group created for a join that failed: the log never had it.
			cs.forgetLocked(req.Group, cg)
		}
		if err != nil {
			cg.mu.Unlock()
			return fail(kerr.ErrorForCode(group.StoreErrorCode(err)).(*kerr.Error), "")
		}
		cs.armLocked(req.Group, cg)
		cg.mu.Unlock()
		return res.Response
	}
}

// errUpgrade is getOrCreate's "a classic group with members holds the id
// and a member joins": the caller tries the online upgrade.
var errUpgrade = &kerr.Error{Message: "UPGRADE", Code: -2}

// getOrCreate returns the group, creating an empty one on a join (taking
// over an Empty classic group of that id); errUpgrade for a join to a
// classic group with members.
func (cs *consumerGroups) getOrCreate(id string, partition int32, join bool) (*consumerGroup, *kerr.Error, string) {
	if known, _ := cs.gc.sgs.exists(id); known { // before cs.mu: a share group's lock is taken before it
		return nil, kerr.GroupIDNotFound, "Group " + id + " is not a consumer group."
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, kerr.CoordinatorNotAvailable, ""
	}
	if cg := cs.groups[id]; cg != nil {
		return cg, nil, ""
	}
	if st, ok := cs.gc.members.GroupState(id); ok {
		if st != "Empty" && st != "Dead" {
			if join {
				return nil, errUpgrade, ""
			}
			return nil, kerr.GroupIDNotFound, "Group " + id + " is not a consumer group."
		}
		if !join {
			return nil, kerr.UnknownMemberID, "Group " + id + " has no member."
		}
		cs.gc.members.RemoveEmptyGroup(id)
	}
	if !join {
		// Kafka: a heartbeat of a member of a group that does not exist.
		return nil, kerr.UnknownMemberID, "Group " + id + " not found."
	}
	cg := &consumerGroup{g: consumer.NewGroup(id, cs.cfg), partition: partition}
	cs.groups[id] = cg
	return cg, nil, ""
}

// persistLocked appends recs (cg.mu held) and, on failure, reverts the
// group to its log.
func (cs *consumerGroups) persistLocked(ctx context.Context, cg *consumerGroup, recs []consumer.Record) error {
	if len(recs) == 0 {
		return nil
	}
	kvs := make([]group.KV, len(recs))
	for i, r := range recs {
		kvs[i].Key, kvs[i].Value = consumer.EncodeRecord(r)
	}
	if err := cs.append(ctx, cg.partition, kvs); err != nil {
		cs.revertLocked(cg, err)
		return err
	}
	cg.hist = append(cg.hist, recs...)
	if len(cg.hist) > 64+8*len(cg.g.Members) {
		cg.hist = compactRecords(cg.hist)
	}
	return nil
}

// revertLocked (cg.mu held) puts the group back to what its log holds,
// after a failed append.
func (cs *consumerGroups) revertLocked(cg *consumerGroup, err error) {
	cs.gc.n.logger.Warn("broker: consumer group records not stored", "group", cg.g.ID, "err", err)
	g := consumer.Replay(cs.cfg, cg.hist)[cg.g.ID]
	if g == nil {
		g = consumer.NewGroup(cg.g.ID, cs.cfg)
	}
	g.Loaded(nowMs())
	cg.g = g
}

// compactRecords keeps the newest record of each key, in the order of
// those newest records (what log compaction keeps), without the members
// that left: a member whose newest records are all tombstones replays to
// no member, as no records do. Keeping their tombstones grew the history
// by three records for every member that ever left, and every append past
// the threshold (persistLocked) compacted all of it.
func compactRecords(recs []consumer.Record) []consumer.Record {
	last := map[string]int{}
	for i, r := range recs {
		k, _ := consumer.EncodeRecord(r)
		last[string(k)] = i
	}
	idx := slices.Sorted(maps.Values(last))
	present := map[string]bool{} // members with a newest record that is not a tombstone
	for _, i := range idx {
		if id, deleted, ok := consumerMemberRecord(recs[i]); ok && !deleted {
			present[id] = true
		}
	}
	out := make([]consumer.Record, 0, len(idx))
	for _, i := range idx {
		if id, _, ok := consumerMemberRecord(recs[i]); ok && !present[id] {
			continue
		}
		out = append(out, recs[i])
	}
	return out
}

// consumerMemberRecord returns the member a record is keyed by (types 5,
// 7 and 8) and whether it is a tombstone; ok false for the group's own
// records.
func consumerMemberRecord(r consumer.Record) (member string, deleted, ok bool) {
	switch r := r.(type) {
	case *consumer.MemberMetadataRecord:
		return r.MemberID, r.Deleted, true
	case *consumer.TargetMemberRecord:
		return r.MemberID, r.Deleted, true
	case *consumer.CurrentAssignmentRecord:
		return r.MemberID, r.Deleted, true
	}
	return "", false, false
}

// forgetLocked (cg.mu held) removes the group from memory.
func (cs *consumerGroups) forgetLocked(id string, cg *consumerGroup) {
	cg.gone = true
	if cg.timer != nil {
		cg.timer.Stop()
	}
	cs.mu.Lock()
	if cs.groups[id] == cg {
		delete(cs.groups, id)
	}
	cs.mu.Unlock()
}

// subscribed returns the topics the members of consumer group id
// subscribe to by name, and all true when one subscribes by regex (any
// topic may be in use); known false when id is not a consumer group here.
func (cs *consumerGroups) subscribed(id string) (topics map[string]bool, all, known bool) {
	known = cs.with(id, func(g *consumer.Group) {
		topics = map[string]bool{}
		for _, m := range g.Members {
			all = all || m.SubscribedTopicRegex != ""
			for _, t := range m.SubscribedTopicNames {
				topics[t] = true
			}
		}
	})
	return topics, all, known
}

// armLocked (cg.mu held) sets the group's timer to its next deadline.
func (cs *consumerGroups) armLocked(id string, cg *consumerGroup) {
	at, ok := cg.g.NextDeadline()
	if cg.timer != nil {
		cg.timer.Stop()
		cg.timer = nil
	}
	if !ok || cg.gone {
		return
	}
	d := time.Duration(at-nowMs())*time.Millisecond + time.Millisecond
	cg.timer = time.AfterFunc(max(d, 0), func() { cs.expire(id, cg) })
}

// expire runs the core's timeouts for the group.
func (cs *consumerGroups) expire(id string, cg *consumerGroup) {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.gone {
		return
	}
	at, ok := cg.g.NextDeadline()
	if !ok {
		return
	}
	if now := nowMs(); at <= now {
		epoch := cg.g.Epoch
		recs := cg.g.Expire(now, cs.image())
		downgraded, err := cs.commitLocked(context.Background(), id, cg, epoch, recs)
		if downgraded {
			return
		}
		if err != nil {
			// Reverted: a member fenced in memory only is fenced again at
			// the next pass, once the log takes the records.
			cg.timer = time.AfterFunc(time.Second, func() { cs.expire(id, cg) })
			return
		}
	}
	cs.armLocked(id, cg)
}

// imageChanged queues a metadataChanged pass off the caller's goroutine
// (reconcile calls it after each metadata view it applied); passes
// requested while one is queued fold into it.
func (cs *consumerGroups) imageChanged() {
	if !cs.kick.CompareAndSwap(false, true) {
		return
	}
	go func() {
		cs.kick.Store(false)
		cs.metadataChanged()
	}()
}

// metadataChanged tells every group of the new topic image (topics
// created, deleted, grown): a changed subscription bumps its epoch.
func (cs *consumerGroups) metadataChanged() {
	cs.mu.Lock()
	all := slices.Collect(maps.Values(cs.groups))
	cs.mu.Unlock()
	if len(all) == 0 {
		return
	}
	img := cs.image()
	for _, cg := range all {
		cg.mu.Lock()
		if !cg.gone {
			_ = cs.persistLocked(context.Background(), cg, cg.g.MetadataChanged(img))
		}
		cg.mu.Unlock()
	}
}

// load installs the groups replayed from a partition's records, replacing
// what the partition had. Called with the partition not yet Loaded.
func (cs *consumerGroups) load(partition int32, recs []consumer.Record) []string {
	cs.unload(partition)
	byGroup := map[string][]consumer.Record{}
	for _, r := range recs {
		byGroup[r.GroupID()] = append(byGroup[r.GroupID()], r)
	}
	groups := consumer.Replay(cs.cfg, recs)
	timeouts := map[string][2]int32{}
	for id := range groups {
		s, i := cs.groupTimeouts(id)
		timeouts[id] = [2]int32{s, i}
	}
	now := nowMs()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var names []string
	for id, g := range groups {
		g.SetTimeouts(timeouts[id][0], timeouts[id][1])
		g.Loaded(now)
		cg := &consumerGroup{g: g, partition: partition, hist: compactRecords(byGroup[id])}
		cs.groups[id] = cg
		cg.mu.Lock()
		cs.armLocked(id, cg)
		cg.mu.Unlock()
		names = append(names, id)
	}
	return names
}

// unload drops the partition's groups (leadership moved, or a reload).
func (cs *consumerGroups) unload(partition int32) {
	cs.mu.Lock()
	var drop []*consumerGroup
	for id, cg := range cs.groups {
		if cg.partition == partition {
			drop = append(drop, cg)
			delete(cs.groups, id)
		}
	}
	cs.mu.Unlock()
	for _, cg := range drop {
		cg.mu.Lock()
		cg.gone = true
		if cg.timer != nil {
			cg.timer.Stop()
		}
		cg.mu.Unlock()
	}
}

// close drops every group.
func (cs *consumerGroups) close() {
	cs.mu.Lock()
	cs.closed = true
	parts := map[int32]bool{}
	for _, cg := range cs.groups {
		parts[cg.partition] = true
	}
	cs.mu.Unlock()
	for p := range parts {
		cs.unload(p)
	}
}

// with runs fn on the group under its lock; false if it is not a
// consumer group here.
func (cs *consumerGroups) with(id string, fn func(g *consumer.Group)) bool {
	cg := cs.lookup(id)
	if cg == nil {
		return false
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.gone {
		return false
	}
	fn(cg.g)
	return true
}

// list returns the groups' ids and states, for ListGroups.
func (cs *consumerGroups) list() map[string]consumer.GroupState {
	cs.mu.Lock()
	all := maps.Clone(cs.groups)
	cs.mu.Unlock()
	out := map[string]consumer.GroupState{}
	for id, cg := range all {
		cg.mu.Lock()
		if !cg.gone {
			out[id] = cg.g.State()
		}
		cg.mu.Unlock()
	}
	return out
}

// groupTimeouts are group id's session timeout and heartbeat interval: its
// own consumer.session.timeout.ms and consumer.heartbeat.interval.ms (GROUP
// resource configs), else the broker's group.consumer.* settings.
func (cs *consumerGroups) groupTimeouts(id string) (sessionMs, intervalMs int32) {
	sessionMs, intervalMs = cs.cfg.SessionTimeoutMs, cs.cfg.HeartbeatIntervalMs
	cs.gc.n.view(func(st *metadata.State) {
		if st == nil {
			return
		}
		cfg := st.Config(metadata.ResourceGroup, id)
		get := func(name string) int32 {
			v, err := strconv.ParseInt(strings.TrimSpace(cfg[name]), 10, 32)
			if err != nil || v <= 0 {
				return 0
			}
			return int32(v)
		}
		if v := get(metadata.ConfigConsumerSessionTimeoutMs); v > 0 {
			sessionMs = v
		}
		if v := get(metadata.ConfigConsumerHeartbeatIntervalMs); v > 0 {
			intervalMs = v
		}
	})
	return sessionMs, intervalMs
}

// consumerGroupConfig is the core's configuration from group.consumer.*.
func (n *Node) consumerGroupConfig() consumer.Config {
	cfg := consumer.DefaultConfig()
	if n.cfg.GroupConsumerSessionTimeout > 0 {
		cfg.SessionTimeoutMs = int32(min(n.cfg.GroupConsumerSessionTimeout.Milliseconds(), 1<<31-1))
	}
	if n.cfg.GroupConsumerHeartbeatInterval > 0 {
		cfg.HeartbeatIntervalMs = int32(min(n.cfg.GroupConsumerHeartbeatInterval.Milliseconds(), 1<<31-1))
	}
	if n.cfg.GroupConsumerMaxSize > 0 && n.cfg.GroupConsumerMaxSize < 1<<31-1 {
		cfg.MaxSize = n.cfg.GroupConsumerMaxSize
	}
	if len(n.cfg.GroupConsumerAssignors) > 0 {
		byName := map[string]consumer.Assignor{}
		for _, a := range consumer.Assignors() {
			byName[a.Name()] = a
		}
		cfg.Assignors = nil
		for _, name := range n.cfg.GroupConsumerAssignors {
			if a := byName[name]; a != nil {
				cfg.Assignors = append(cfg.Assignors, a)
			}
		}
	}
	return cfg
}

// validateCommit checks an OffsetCommit (txn: a TxnOffsetCommit) of
// member at epoch against the consumer group id; handled false when id
// is not a consumer group here (the classic path decides).
func (cs *consumerGroups) validateCommit(id, member string, epoch int32, txn bool, version int16) (handled bool, err error) {
	handled = cs.with(id, func(g *consumer.Group) {
		if e := g.ValidateOffsetCommit(member, epoch, txn, version); e != nil {
			err = e
		}
	})
	return handled, err
}

// validateFetch checks an OffsetFetch v9+ of member at epoch against the
// consumer group id; nil when id is not a consumer group here.
func (cs *consumerGroups) validateFetch(id string, member *string, epoch int32) (err error) {
	cs.with(id, func(g *consumer.Group) {
		if e := g.ValidateOffsetFetch(member, epoch); e != nil {
			err = e
		}
	})
	return err
}

// groupIsConsumer reports whether id is a KIP-848 consumer group here.
func (n *Node) groupIsConsumer(id string) bool {
	known, _ := n.groups.cgs.exists(id)
	return known
}

// deleteGroup deletes the consumer group id (DeleteGroups): only an empty
// one (else NON_EMPTY_GROUP), by appending its remaining records'
// tombstones (target metadata, group epoch) and then those of its
// offsets. handled is false when id is not a consumer group here.
func (cs *consumerGroups) deleteGroup(ctx context.Context, id string) (handled bool, code int16) {
	return cs.dropEmpty(ctx, id, true)
}

// dropEmpty removes the consumer group id if it has no members, writing
// its tombstones; withOffsets also deletes its committed offsets (a
// DeleteGroups; a classic JoinGroup taking the id over keeps them).
func (cs *consumerGroups) dropEmpty(ctx context.Context, id string, withOffsets bool) (handled bool, code int16) {
	cg := cs.lookup(id)
	if cg == nil {
		return false, 0
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.gone {
		return false, 0
	}
	if len(cg.g.Members) > 0 {
		return true, kerr.NonEmptyGroup.Code
	}
	recs := []consumer.Record{
		&consumer.TargetMetadataRecord{Group: id, Deleted: true},
		&consumer.GroupMetadataRecord{Group: id, Deleted: true},
	}
	if err := cs.persistLocked(ctx, cg, recs); err != nil {
		return true, group.StoreErrorCode(err)
	}
	cs.forgetLocked(id, cg)
	if !withOffsets {
		return true, 0
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cs.gc.n.cfg.OffsetsCommitTimeout+5*time.Second)
	defer cancel()
	if err := cs.gc.store.DeleteGroup(sctx, cg.partition, id); err != nil {
		return true, group.StoreErrorCode(err)
	}
	return true, 0
}

// deleteGroups is DeleteGroups over both kinds of groups: consumer groups
// here, the rest by the classic coordinator, answered in request order.
func (n *Node) deleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	classic := *req
	classic.Groups = nil
	mine := map[string]int16{}
	for _, id := range req.Groups {
		if _, done := mine[id]; done {
			continue
		}
		if _, err := n.groups.partitionOf(id); err == nil {
			if handled, code := n.groups.cgs.deleteGroup(ctx, id); handled {
				mine[id] = code
				continue
			}
			if handled, code := n.groups.sgs.deleteGroup(ctx, id); handled {
				mine[id] = code // share_groups.go
				continue
			}
		}
		classic.Groups = append(classic.Groups, id)
	}
	resp := n.groups.members.DeleteGroups(ctx, &classic)
	if len(mine) == 0 {
		return resp
	}
	byName := map[string]kmsg.DeleteGroupsResponseGroup{}
	for _, g := range resp.Groups {
		byName[g.Group] = g
	}
	out := *resp
	out.Groups = nil
	seen := map[string]bool{}
	for _, id := range req.Groups {
		if seen[id] {
			continue
		}
		seen[id] = true
		if code, ok := mine[id]; ok {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = id, code
			out.Groups = append(out.Groups, rg)
		} else if g, ok := byName[id]; ok {
			out.Groups = append(out.Groups, g)
		}
	}
	return &out
}

// listConsumerGroups adds the consumer groups to a ListGroups answer
// (v5+ TypesFilter, v4+ StatesFilter, as Kafka: case-insensitive), sorted
// by name with the classic ones.
func (n *Node) listConsumerGroups(req *kmsg.ListGroupsRequest, resp *kmsg.ListGroupsResponse) {
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(s string) bool { return strings.EqualFold(s, "consumer") }) {
		return
	}
	added := false
	for id, st := range n.groups.cgs.list() {
		if len(req.StatesFilter) > 0 && !slices.ContainsFunc(req.StatesFilter, func(s string) bool { return strings.EqualFold(s, string(st)) }) {
			continue
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = id, "consumer", string(st), "consumer"
		resp.Groups = append(resp.Groups, g)
		added = true
	}
	if added {
		slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	}
}
