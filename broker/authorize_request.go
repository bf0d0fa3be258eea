package broker

// Whole-request authorization: the APIs whose refusal, in Kafka's
// KafkaApis, is one error for the whole request (a top-level error code)
// are decided here, before their handler runs, by one pure function of
// the authorizer, the principal and host, and the decoded request. The
// APIs refusing item by item (a topic, a group, a resource of a
// multi-resource request) check in their handlers.

import (
	"context"
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
)

// who is the subject of a decision: a principal ("User:x") at a host.
type who struct{ principal, host string }

func (w who) may(az *authz.Authorizer, op authz.Operation, rt authz.ResourceType, name string) bool {
	return az.Authorize(w.principal, w.host, op, rt, name)
}

func (w who) mayCluster(az *authz.Authorizer, op authz.Operation) bool {
	return w.may(az, op, authz.ResCluster, authz.ClusterName)
}

// requestRefusal is the error code refusing the whole request, 0 to let
// its handler run (which may still refuse items). az is not nil.
func requestRefusal(az *authz.Authorizer, w who, req kmsg.Request) int16 {
	group := func(id string) int16 {
		if !w.may(az, authz.OpRead, authz.ResGroup, id) {
			return kerr.GroupAuthorizationFailed.Code
		}
		return 0
	}
	txn := func(id string) int16 {
		if !w.may(az, authz.OpWrite, authz.ResTransactionalID, id) {
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
		return 0
	}
	cluster := func(op authz.Operation) int16 {
		if !w.mayCluster(az, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
		return 0
	}
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return group(r.Group)
	case *kmsg.SyncGroupRequest:
		return group(r.Group)
	case *kmsg.HeartbeatRequest:
		return group(r.Group)
	case *kmsg.LeaveGroupRequest:
		return group(r.Group)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return group(r.Group)
	case *kmsg.ShareFetchRequest:
		if r.GroupID != nil {
			return group(*r.GroupID)
		}
	case *kmsg.ShareAcknowledgeRequest:
		if r.GroupID != nil {
			return group(*r.GroupID)
		}
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil {
			return txn(*r.TransactionalID)
		}
		// KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic.
		if !w.mayCluster(az, authz.OpIdempotentWrite) && !az.AuthorizeAny(w.principal, w.host, authz.OpWrite, authz.ResTopic) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	case *kmsg.AddOffsetsToTxnRequest:
		if c := txn(r.TransactionalID); c != 0 {
			return c
		}
		return group(r.Group)
	case *kmsg.EndTxnRequest:
		return txn(r.TransactionalID)
	case *kmsg.ElectLeadersRequest, *kmsg.AlterPartitionAssignmentsRequest, *kmsg.UnregisterBrokerRequest:
		return cluster(authz.OpAlter)
	case *kmsg.ListPartitionReassignmentsRequest, *kmsg.DescribeUserSCRAMCredentialsRequest:
		return cluster(authz.OpDescribe)
	}
	return 0
}

// authorizeFirst wraps a handler with requestRefusal: a refused request
// is answered with the API's empty response carrying the code.
func authorizeFirst(key int16, fn handlerFunc) handlerFunc {
	return func(ctx context.Context, n *Node, r *request) (*frame, error) {
		az := n.authorizer()
		if az == nil {
			return fn(ctx, n, r)
		}
		code := requestRefusal(az, who{r.principal(), r.host()}, r.msg)
		if code == 0 {
			return fn(ctx, n, r)
		}
		resp := kmsg.ResponseForKey(key)
		resp.SetVersion(r.version)
		// Every response of requestRefusal's APIs has a top-level ErrorCode
		// (ElectLeaders from v1; it lists each partition with it too).
		reflect.ValueOf(resp).Elem().FieldByName("ErrorCode").SetInt(int64(code))
		if req, ok := r.msg.(*kmsg.ElectLeadersRequest); ok {
			er := resp.(*kmsg.ElectLeadersResponse)
			for _, t := range req.Topics {
				rt := kmsg.NewElectLeadersResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewElectLeadersResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, code
					rt.Partitions = append(rt.Partitions, rp)
				}
				er.Topics = append(er.Topics, rt)
			}
		}
		return encodeResponse(r, resp), nil
	}
}
