package broker

// Online migration between classic and KIP-848 consumer groups
// (group.consumer.migration.policy), the shell around the core's
// decisions (broker/group/consumer migration.go) and the classic
// coordinator's hand-over (broker/group migrate.go).
//
// Upgrade: a ConsumerGroupHeartbeat joining a classic group with members
// converts it when the policy allows, its protocol type is consumer, it
// is Stable, its members' subscriptions and assignments decode and they
// fit group.consumer.max.size (Kafka's validateOnlineUpgrade); else
// GROUP_ID_NOT_FOUND "Group %s is not a consumer group.". The classic
// group's tombstone and the consumer group's creation records are one
// append; only then is the classic group dropped (its parked JoinGroups
// and SyncGroups answered REBALANCE_IN_PROGRESS). The members keep
// working with JoinGroup, SyncGroup, Heartbeat and LeaveGroup, served by
// the consumer group (Group.Classic*): REBALANCE_IN_PROGRESS on a
// heartbeat tells one to rejoin when its assignment changes.
//
// Downgrade: when a member removal (a leave, a classic LeaveGroup, a
// session or rebalance timeout) leaves only classic members and the
// policy allows, with at most group.max.size of them (Kafka's
// validateOnlineDowngradeWithFencedMembers), the removal's records, the
// consumer group's tombstones and the classic group's GroupMetadata record
// are one append; the classic coordinator then adopts the group and
// starts a rebalance (Kafka's convertToClassicGroup).
//
// A classic JoinGroup for a consumer group with members is served
// whatever the policy (as Kafka: the policy governs conversions only).
//
// Differences from Kafka: a classic JoinGroup that passed the consumer
// group check just before an upgrade installed the consumer group may
// reach the classic coordinator after the classic group was dropped (a
// known member is told UNKNOWN_MEMBER_ID and rejoins; a new one may leave
// an Empty classic group of that id behind, its next JoinGroup going to
// the consumer group); Kafka runs a partition's requests on one thread.

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/group"
	"github.com/strata-io/strata/broker/group/consumer"
)

// upgradeRefused is a conversion the core or the classic group refused:
// the joining member is told the group is not a consumer group.
type upgradeRefused struct{ reason string }

func (e upgradeRefused) Error() string { return e.reason }

// upgrade converts the classic group id with members into a consumer
// group (installed in cs.groups on success). found false: no classic
// group with members (the caller looks again).
func (cs *consumerGroups) upgrade(ctx context.Context, id string, partition int32) (found bool, code *kerr.Error, msg string) {
	policy := cs.gc.n.cfg.GroupConsumerMigrationPolicy
	img := cs.image()
	session, interval := cs.groupTimeouts(id)
	found, err := cs.gc.members.Upgrade(id, func(v group.ClassicView) error {
		if ok, reason := consumer.CanUpgrade(policy, v.ProtocolType, len(v.Members), cs.cfg.MaxSize); !ok {
			return upgradeRefused{reason}
		}
		if v.State != "Stable" {
			return upgradeRefused{"the classic group is " + v.State + ", not Stable"}
		}
		members := make([]consumer.ClassicMember, len(v.Members))
		for i, m := range v.Members {
			cm := consumer.ClassicMember{ID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost,
				SessionTimeoutMs: m.SessionTimeoutMs, RebalanceTimeoutMs: m.RebalanceTimeoutMs, Assignment: m.Assignment}
			if m.InstanceID != nil {
				cm.InstanceID = *m.InstanceID
			}
			for _, p := range m.Protocols {
				cm.Protocols = append(cm.Protocols, consumer.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
			}
			members[i] = cm
		}
		g, recs, err := consumer.FromClassic(id, cs.cfg, v.Generation, v.Protocol, members, img)
		if err != nil {
			return upgradeRefused{err.Error()}
		}
		kvs := append([]group.KV{group.GroupMetadataRecord(group.GroupSnapshot{Group: id}, true)}, encodeRecords(recs)...)
		if err := cs.append(ctx, partition, kvs); err != nil {
			return err
		}
		g.SetTimeouts(session, interval)
		g.Loaded(nowMs())
		cg := &consumerGroup{g: g, partition: partition, hist: recs}
		cs.mu.Lock()
		cs.groups[id] = cg
		cs.mu.Unlock()
		cg.mu.Lock()
		cs.armLocked(id, cg)
		cg.mu.Unlock()
		cs.gc.n.logger.Info("broker: classic group upgraded to a consumer group", "group", id, "generation", v.Generation, "members", len(v.Members))
		return nil
	})
	var refused upgradeRefused
	switch {
	case errors.As(err, &refused):
		cs.gc.n.logger.Info("broker: classic group not upgraded", "group", id, "reason", refused.reason)
		return true, kerr.GroupIDNotFound, "Group " + id + " is not a consumer group."
	case err != nil:
		return true, kerr.ErrorForCode(group.StoreErrorCode(err)).(*kerr.Error), ""
	}
	return found, nil, ""
}

func encodeRecords(recs []consumer.Record) []group.KV {
	kvs := make([]group.KV, len(recs))
	for i, r := range recs {
		kvs[i].Key, kvs[i].Value = consumer.EncodeRecord(r)
	}
	return kvs
}

// append writes kvs to partition (acks=all), bounded by
// offsets.commit.timeout.ms.
func (cs *consumerGroups) append(ctx context.Context, partition int32, kvs []group.KV) error {
	sctx, cancel := context.WithTimeout(ctx, cs.gc.n.cfg.OffsetsCommitTimeout+5*time.Second)
	defer cancel()
	return cs.gc.store.AppendRecords(sctx, partition, kvs)
}

// commitLocked (cg.mu held) persists recs as persistLocked does, and
// downgrades the group when they removed a member and only classic
// members remain (see the file comment). downgraded true: the group is
// now the classic coordinator's and cg is gone.
//
// epoch is the group epoch before the removal: the classic group's
// generation, as Kafka converts the group without the leaving members
// rather than after fencing them (so the Stable classic members'
// generation is the group's and their heartbeats say
// REBALANCE_IN_PROGRESS, not ILLEGAL_GENERATION).
func (cs *consumerGroups) commitLocked(ctx context.Context, id string, cg *consumerGroup, epoch int32, recs []consumer.Record) (downgraded bool, err error) {
	removed := false
	for _, r := range recs {
		if m, ok := r.(*consumer.MemberMetadataRecord); ok && m.Deleted {
			removed = true
		}
	}
	if !removed {
		return false, cs.persistLocked(ctx, cg, recs)
	}
	if ok, _ := consumer.CanDowngradeWithout(cs.gc.n.cfg.GroupConsumerMigrationPolicy, cg.g, nil, cs.gc.n.cfg.GroupMaxSize); !ok {
		return false, cs.persistLocked(ctx, cg, recs)
	}
	clg, tomb, err := cg.g.ToClassic(nil, cs.image())
	if err != nil {
		cs.gc.n.logger.Info("broker: consumer group not downgraded", "group", id, "reason", err)
		return false, cs.persistLocked(ctx, cg, recs)
	}
	clg.Generation = epoch
	snap := group.GroupSnapshot{Group: id, ProtocolType: "consumer", Protocol: clg.Protocol, Leader: clg.Leader,
		Generation: clg.Generation, StateTimestamp: time.Now().UnixMilli()}
	protocols := map[string][]group.Protocol{}
	for _, m := range clg.Members {
		ms := group.MemberSnapshot{MemberID: m.ID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			RebalanceTimeoutMs: m.RebalanceTimeoutMs, SessionTimeoutMs: m.SessionTimeoutMs, Assignment: m.Assignment}
		if m.InstanceID != "" {
			ms.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		for _, p := range m.Protocols {
			protocols[m.ID] = append(protocols[m.ID], group.Protocol{Name: p.Name, Metadata: p.Metadata})
			if p.Name == clg.Protocol && ms.Subscription == nil {
				ms.Subscription = p.Metadata
			}
		}
		snap.Members = append(snap.Members, ms)
	}
	kvs := append(encodeRecords(append(recs, tomb...)), group.GroupMetadataRecord(snap, false))
	if err := cs.append(ctx, cg.partition, kvs); err != nil {
		cs.revertLocked(cg, err)
		return false, err
	}
	cs.gc.members.Adopt(cg.partition, snap, protocols, "Downgrade group "+id+" from consumer to classic.")
	cs.forgetLocked(id, cg)
	cs.gc.n.logger.Info("broker: consumer group downgraded to a classic group", "group", id, "generation", clg.Generation, "members", len(clg.Members))
	return true, nil
}

// classicGroup returns the consumer group id, locked, when it serves
// classic requests (it exists here; JoinGroup also needs members); the
// caller unlocks.
func (cs *consumerGroups) classicGroup(id string, needMembers bool) *consumerGroup {
	cg := cs.lookup(id)
	if cg == nil {
		return nil
	}
	cg.mu.Lock()
	if cg.gone || (needMembers && len(cg.g.Members) == 0) {
		cg.mu.Unlock()
		return nil
	}
	return cg
}

// classicJoin serves a JoinGroup for a consumer group with members
// (Kafka's classicGroupJoinToConsumerGroup); handled false: not one here.
func (cs *consumerGroups) classicJoin(ctx context.Context, req *kmsg.JoinGroupRequest, c consumer.Client) (*kmsg.JoinGroupResponse, bool) {
	session, interval := cs.groupTimeouts(req.Group)
	img := cs.image()
	cg := cs.classicGroup(req.Group, true)
	if cg == nil {
		return nil, false
	}
	defer cg.mu.Unlock()
	cfg := cs.gc.n.cfg
	if st := time.Duration(req.SessionTimeoutMillis) * time.Millisecond; st < cfg.GroupMinSessionTimeout || st > cfg.GroupMaxSessionTimeout {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = kerr.InvalidSessionTimeout.Code, -1, req.MemberID
		return resp, true
	}
	cg.g.SetTimeouts(session, interval)
	resp, recs := cg.g.ClassicJoin(nowMs(), req, c, img)
	if err := cs.persistLocked(ctx, cg, recs); err != nil {
		resp = req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = group.StoreErrorCode(err), -1, req.MemberID
	}
	cs.armLocked(req.Group, cg)
	return resp, true
}

// classicSync serves a SyncGroup for a consumer group (Kafka's
// classicGroupSyncToConsumerGroup).
func (cs *consumerGroups) classicSync(req *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, bool) {
	img := cs.image()
	cg := cs.classicGroup(req.Group, false)
	if cg == nil {
		return nil, false
	}
	defer cg.mu.Unlock()
	resp := cg.g.ClassicSync(nowMs(), req, img)
	cs.armLocked(req.Group, cg)
	return resp, true
}

// classicHeartbeat serves a Heartbeat for a consumer group (Kafka's
// classicGroupHeartbeatToConsumerGroup).
func (cs *consumerGroups) classicHeartbeat(req *kmsg.HeartbeatRequest) (*kmsg.HeartbeatResponse, bool) {
	cg := cs.classicGroup(req.Group, false)
	if cg == nil {
		return nil, false
	}
	defer cg.mu.Unlock()
	instance := ""
	if req.InstanceID != nil {
		instance = *req.InstanceID
	}
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if e, _ := cg.g.ClassicHeartbeat(nowMs(), req.MemberID, instance, req.Generation); e != nil {
		resp.ErrorCode = e.Code
	}
	cs.armLocked(req.Group, cg)
	return resp, true
}

// classicLeave serves a LeaveGroup for a consumer group (Kafka's
// classicGroupLeaveToConsumerGroup); the last consumer-protocol member
// gone, the removal may downgrade the group.
func (cs *consumerGroups) classicLeave(ctx context.Context, req *kmsg.LeaveGroupRequest) (*kmsg.LeaveGroupResponse, bool) {
	img := cs.image()
	cg := cs.classicGroup(req.Group, false)
	if cg == nil {
		return nil, false
	}
	defer cg.mu.Unlock()
	members := req.Members
	if req.GetVersion() < 3 {
		lm := kmsg.NewLeaveGroupRequestMember()
		lm.MemberID = req.MemberID
		members = []kmsg.LeaveGroupRequestMember{lm}
	}
	epoch := cg.g.Epoch
	out, recs := cg.g.ClassicLeave(members, img)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if downgraded, err := cs.commitLocked(ctx, req.Group, cg, epoch, recs); err != nil {
		resp.ErrorCode = group.StoreErrorCode(err)
		return resp, true
	} else if !downgraded {
		cs.armLocked(req.Group, cg)
	}
	if req.GetVersion() < 3 {
		if len(out) == 1 {
			resp.ErrorCode = out[0].ErrorCode
		}
		return resp, true
	}
	resp.Members = out
	return resp, true
}
