package broker

// CreateTopics (key 19), versions 0 through kmsg's newest (7).
//
// Behaviour: the request goes to the controller (metadata.PlanCreateTopics
// decides: names, counts, assignments, configs), with num.partitions and
// default.replication.factor for counts of -1. Per-topic errors are the
// controller's Kafka codes with a message (v1+). ValidateOnly (v1+) plans
// without committing. On success the handler waits, within the request's
// timeout, until each new topic has reached this broker's metadata view, so
// a client that produces right after CreateTopics finds it. v5+ returns the
// partition count, replication factor and the topic's configs (only the
// ones set on the topic, as non-default); v7 the topic id.
//
// A topic whose partitions would take this broker past its open-file
// budget (fdbudget.go) gets POLICY_VIOLATION with a message naming the
// limit, and is not created.
//
// A request whose topics would add more than maxNewPartitionsPerRequest
// partitions in all gets POLICY_VIOLATION for the topics past the limit
// (Kafka's controller caps one operation at 10000 records): a fuzzed
// NumPartitions of 2^31 must not make the controller plan billions.
//
// Differences from Kafka: configs in the v5+ response list only the
// topic's own settings, not every default; a timeout of 0 does not skip
// the wait for the controller (the controller always answers first).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(19, 0, handleCreateTopics) }

func handleCreateTopics(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.CreateTopicsRequest)
	resp := kmsg.NewPtrCreateTopicsResponse()
	creq := metadata.CreateTopicsRequest{
		ValidateOnly:             req.ValidateOnly,
		DefaultPartitions:        n.cfg.NumPartitions,
		DefaultReplicationFactor: n.cfg.DefaultReplicationFactor,
	}
	var refused []kmsg.CreateTopicsResponseTopic
	added := int64(0)
	az := n.authorizer() // authorize.go: CREATE on the cluster or the topic
	clusterCreate := r.allowedCluster(az, authz.OpCreate)
	for _, t := range req.Topics {
		if !clusterCreate && !r.allowed(az, authz.OpCreate, authz.ResTopic, t.Topic) {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			refused = append(refused, rt)
			continue
		}
		parts := int64(t.NumPartitions)
		if len(t.ReplicaAssignment) > 0 {
			parts = int64(len(t.ReplicaAssignment))
		} else if parts == -1 {
			parts = int64(n.cfg.NumPartitions)
		}
		if parts > 0 && added+parts > maxNewPartitionsPerRequest {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, kerr.PolicyViolation.Code
			rt.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("excessively large number of partitions per request (more than %d new)", maxNewPartitionsPerRequest))
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			refused = append(refused, rt)
			continue
		}
		added += max(parts, 0)
		ct := metadata.CreateTopic{Name: t.Topic, NumPartitions: t.NumPartitions, ReplicationFactor: t.ReplicationFactor}
		if len(t.ReplicaAssignment) > 0 {
			ct.Assignments = make([][]int32, len(t.ReplicaAssignment))
			for _, a := range t.ReplicaAssignment {
				if a.Partition < 0 || int(a.Partition) >= len(t.ReplicaAssignment) {
					ct.Assignments = nil // malformed: let the planner reject the counts
					ct.NumPartitions, ct.ReplicationFactor = 0, 0
					break
				}
				ct.Assignments[a.Partition] = a.Replicas
			}
		}
		if len(t.Configs) > 0 {
			ct.Configs = map[string]string{}
			for _, c := range t.Configs {
				if c.Value != nil {
					ct.Configs[c.Name] = *c.Value
				}
			}
		}
		if err := n.checkRemoteStorage(ct.Configs); err != nil {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.InvalidConfig.Code, kmsg.StringPtr(err.Error())
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			refused = append(refused, rt)
			continue
		}
		creq.Topics = append(creq.Topics, ct)
	}
	// The open-file budget (fdbudget.go): a topic whose partitions would
	// not fit is refused here and never reaches the controller.
	// controller_mutation_rate (quotas.go): each topic's partitions.
	mq := n.mutationQuota(r, r.version >= 6)
	if req.ValidateOnly {
		mq = nil
	}
	taken := map[string]int64{}
	admitted := creq.Topics[:0]
	for _, ct := range creq.Topics {
		parts := int64(ct.NumPartitions)
		if len(ct.Assignments) > 0 {
			parts = int64(len(ct.Assignments))
		} else if parts == -1 {
			parts = int64(n.cfg.NumPartitions)
		}
		if err := mq.take(parts); err != nil {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = ct.Name, errCode(err), kmsg.StringPtr(kerr.ThrottlingQuotaExceeded.Description)
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			refused = append(refused, rt)
			continue
		}
		taken[ct.Name] = parts
		release, err := n.reservePartitions(n.onThisNode(parts, ct.ReplicationFactor, ct.Assignments))
		if err != nil {
			mq.giveBack(parts)
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = ct.Name, errCode(err), kmsg.StringPtr(err.Error())
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			refused = append(refused, rt)
			continue
		}
		defer release() // after waitTopics: the logs are open and counted by then
		admitted = append(admitted, ct)
	}
	creq.Topics = admitted
	resp.Topics = refused
	if len(creq.Topics) == 0 {
		mq.done()
		return encodeResponse(r, resp), nil
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout(req.TimeoutMillis))
	defer cancel()
	results, err := n.svc.CreateTopics(cctx, creq)
	if err != nil {
		for _, t := range creq.Topics {
			mq.giveBack(taken[t.Name])
		}
		for _, t := range creq.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Name, errCode(err)
			if errors.Is(err, context.DeadlineExceeded) {
				rt.ErrorCode = kerr.RequestTimedOut.Code
			}
			rt.ErrorMessage = kmsg.StringPtr(err.Error())
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, rt)
		}
		mq.done()
		return encodeResponse(r, resp), nil
	}
	var created []string
	for _, res := range results {
		if res.Err == nil && !req.ValidateOnly {
			created = append(created, res.Name)
		} else if res.Err != nil {
			mq.giveBack(taken[res.Name])
		}
	}
	n.waitTopics(cctx, created)
	for _, res := range results {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = res.Name
		rt.TopicID = res.TopicID
		rt.NumPartitions, rt.ReplicationFactor = -1, -1
		if res.Err != nil {
			rt.ErrorCode = metadata.ErrorCode(res.Err)
			rt.ErrorMessage = kmsg.StringPtr(res.Err.Error())
		} else {
			rt.NumPartitions, rt.ReplicationFactor = res.NumPartitions, res.ReplicationFactor
			names := make([]string, 0, len(res.Configs))
			for k := range res.Configs {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				c.Name, c.Value = k, kmsg.StringPtr(res.Configs[k])
				c.Source = 1 // DYNAMIC_TOPIC_CONFIG
				rt.Configs = append(rt.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, rt)
	}
	mq.done()
	return encodeResponse(r, resp), nil
}

// requestTimeout turns a request's TimeoutMillis into a duration, with 30s
// for a missing or silly value.
func requestTimeout(ms int32) time.Duration {
	if ms <= 0 || ms > 5*60*1000 {
		return 30 * time.Second
	}
	return time.Duration(ms) * time.Millisecond
}
