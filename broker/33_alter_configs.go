package broker

// AlterConfigs (key 33), versions 0 through kmsg's newest (2).
//
// Behaviour: each resource's configs are replaced by exactly the given set
// (a null value: not set), through the controller (metadata.PlanAlterConfigs
// validates the resulting config as a whole: INVALID_CONFIG with a message;
// UNKNOWN_TOPIC_OR_PARTITION; INVALID_REQUEST for a repeated resource, a bad
// broker id or an unsupported resource type). ValidateOnly plans without
// committing. TOPIC, BROKER (a broker id, or "" for the cluster-wide
// default) and GROUP resources (a group id: consumer.session.timeout.ms and
// consumer.heartbeat.interval.ms, checked against this broker's
// group.consumer.{min,max}.* bounds) are supported; a committed change reaches the
// partitions' logs through the metadata follower (reconcile →
// storage.Manager.UpdateConfig). On success the handler waits, for at most
// alterConfigsWait, until this broker's metadata view shows the change, so
// a DescribeConfigs right after sees it.
//
// Differences from Kafka: a BROKER resource may name any broker id (the
// controller checks only the syntax); BROKER_LOGGER is refused with
// INVALID_REQUEST.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(33, 0, handleAlterConfigs) }

// alterConfigsWait bounds the wait for a committed change to reach this
// broker's view (it normally takes one metadata delta; a concurrent
// change to the same resource by another client can keep it from ever
// matching).
const alterConfigsWait = 5 * time.Second

func handleAlterConfigs(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.AlterConfigsRequest)
	mreq := metadata.AlterConfigsRequest{ValidateOnly: req.ValidateOnly}
	refused := make([]error, len(req.Resources)) // authorize.go: ALTER_CONFIGS
	az := n.authorizer()
	for i, rr := range req.Resources {
		refused[i] = r.configRefusal(az, rr.ResourceType, rr.ResourceName, authz.OpAlterConfigs)
		res := metadata.AlterConfigResource{Type: metadata.ResourceType(rr.ResourceType), Name: rr.ResourceName}
		for _, c := range rr.Configs {
			res.Configs = append(res.Configs, metadata.AlterConfigEntry{Name: c.Name, Value: c.Value})
		}
		mreq.Resources = append(mreq.Resources, res)
	}
	resp := kmsg.NewPtrAlterConfigsResponse()
	for _, res := range n.alterConfigs(ctx, mreq, refused) {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceType(res.Type), res.Name
		rr.ErrorCode, rr.ErrorMessage = res.code, res.msg
		resp.Resources = append(resp.Resources, rr)
	}
	return encodeResponse(r, resp), nil
}

// alterResult is one resource's outcome as the responses carry it.
type alterResult struct {
	Type metadata.ResourceType
	Name string
	code int16
	msg  *string
}

// alterConfigs sends an (incremental or full) alter to the controller and,
// unless validating only, waits until this broker's view holds every
// accepted change: planning the accepted part again on the view yields no
// records. Results are in request order.
// A resource whose refused[i] is non-nil is answered with it and not sent.
func (n *Node) alterConfigs(ctx context.Context, mreq metadata.AlterConfigsRequest, refused []error) []alterResult {
	out := make([]alterResult, len(mreq.Resources))
	if mreq.GroupBounds == nil && slices.ContainsFunc(mreq.Resources, func(r metadata.AlterConfigResource) bool { return r.Type == metadata.ResourceGroup }) {
		b := n.groupConfigBounds()
		mreq.GroupBounds = &b
	}
	sent := mreq
	sent.Resources = nil
	var idx []int // sent.Resources[j] is mreq.Resources[idx[j]]
	for i, res := range mreq.Resources {
		out[i] = alterResult{Type: res.Type, Name: res.Name}
		if i < len(refused) && refused[i] != nil {
			out[i].code, out[i].msg = errCode(refused[i]), kmsg.StringPtr(refused[i].Error())
			continue
		}
		if res.Type == metadata.ResourceTopic {
			for _, e := range res.Configs {
				if e.Value != nil {
					if err := n.checkRemoteStorage(map[string]string{e.Name: *e.Value}); err != nil {
						out[i].code, out[i].msg = errCode(err), kmsg.StringPtr(err.Error())
						break
					}
				}
			}
			if out[i].code != 0 {
				continue
			}
		}
		sent.Resources = append(sent.Resources, res)
		idx = append(idx, i)
	}
	if len(sent.Resources) == 0 {
		return out
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(0))
	defer cancel()
	results, err := n.svc.AlterConfigs(cctx, sent)
	if err == nil && len(results) != len(sent.Resources) {
		err = errResultCount
	}
	if err != nil {
		for _, i := range idx {
			out[i].code, out[i].msg = errCode(err), kmsg.StringPtr(err.Error())
		}
		return out
	}
	applied := metadata.AlterConfigsRequest{Incremental: mreq.Incremental, GroupBounds: mreq.GroupBounds}
	for j, res := range results {
		if res.Err != nil {
			out[idx[j]].code, out[idx[j]].msg = metadata.ErrorCode(res.Err), kmsg.StringPtr(res.Err.Error())
			continue
		}
		applied.Resources = append(applied.Resources, sent.Resources[j])
	}
	if mreq.ValidateOnly || len(applied.Resources) == 0 {
		return out
	}
	wctx, wcancel := context.WithTimeout(ctx, alterConfigsWait)
	defer wcancel()
	n.waitMetadata(wctx, func(st *metadata.State) bool {
		recs, _ := st.PlanAlterConfigs(applied)
		return len(recs) == 0
	})
	return out
}

// groupConfigBounds are this broker's group.consumer.* settings that GROUP
// resource configs are validated against (the controller has no broker
// settings of its own).
func (n *Node) groupConfigBounds() metadata.GroupConfigBounds {
	b := metadata.DefaultGroupConfigBounds
	ms := func(name string, dst *int32) {
		v, ok := n.cfg.Props[name]
		if !ok {
			s, _ := lookupSetting(name)
			v = s.Default
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32); err == nil && v > 0 {
			*dst = int32(v)
		}
	}
	ms("group.consumer.min.session.timeout.ms", &b.MinSessionTimeoutMs)
	ms("group.consumer.max.session.timeout.ms", &b.MaxSessionTimeoutMs)
	ms("group.consumer.min.heartbeat.interval.ms", &b.MinHeartbeatIntervalMs)
	ms("group.consumer.max.heartbeat.interval.ms", &b.MaxHeartbeatIntervalMs)
	ms("group.consumer.session.timeout.ms", &b.SessionTimeoutMs)
	ms("group.consumer.heartbeat.interval.ms", &b.HeartbeatIntervalMs)
	ms("group.share.min.session.timeout.ms", &b.ShareMinSessionTimeoutMs)
	ms("group.share.max.session.timeout.ms", &b.ShareMaxSessionTimeoutMs)
	ms("group.share.min.heartbeat.interval.ms", &b.ShareMinHeartbeatIntervalMs)
	ms("group.share.max.heartbeat.interval.ms", &b.ShareMaxHeartbeatIntervalMs)
	ms("group.share.session.timeout.ms", &b.ShareSessionTimeoutMs)
	ms("group.share.heartbeat.interval.ms", &b.ShareHeartbeatIntervalMs)
	// The share-partition leader's settings (S19c's): Kafka's defaults
	// while they are not settings of this broker.
	ms("group.share.min.record.lock.duration.ms", &b.ShareMinRecordLockDurationMs)
	ms("group.share.max.record.lock.duration.ms", &b.ShareMaxRecordLockDurationMs)
	return b
}

// checkRemoteStorage refuses remote.storage.enable=true on a node whose
// remote tier is off (remote.log.storage.system.enable=false), as Kafka
// does: nothing would upload the topic's segments, and local retention,
// which deletes only uploaded data, would never free its disk.
func (n *Node) checkRemoteStorage(configs map[string]string) error {
	if v, ok := configs[metadata.ConfigRemoteStorageEnable]; ok && strings.EqualFold(strings.TrimSpace(v), "true") && !n.cfg.RemoteStorageEnable {
		return fmt.Errorf("%w: remote.storage.enable=true needs remote.log.storage.system.enable=true on the brokers", kerr.InvalidConfig)
	}
	return nil
}
