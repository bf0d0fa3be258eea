package broker

// AlterClientQuotas (key 49), versions 0 and 1.
//
// Behaviour, as Kafka's KafkaApis and ClientQuotaControlManager: without
// ALTER_CONFIGS on the cluster every entry is CLUSTER_AUTHORIZATION_FAILED.
// Otherwise the entries go to the controller (metadata.PlanAlterClientQuotas:
// INVALID_REQUEST for a bad entity, key or value, the entry left unchanged;
// validate_only writes nothing). The answer leaves only once this broker's
// image, and so its quota enforcement, holds every applied entry
// (read-your-writes); past the wait the applied entries answer
// REQUEST_TIMED_OUT.
//
// Differences from Kafka: a value that is not a finite number is
// INVALID_REQUEST.

import (
	"context"
	"errors"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(49, 0, handleAlterClientQuotas) }

func handleAlterClientQuotas(ctx context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.AlterClientQuotasRequest)
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	resp.Entries = make([]kmsg.AlterClientQuotasResponseEntry, len(req.Entries))
	alts := make([]metadata.QuotaAlteration, len(req.Entries))
	for i, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range e.Entity {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			re.Entity = append(re.Entity, ent)
			alts[i].Entity = append(alts[i].Entity, metadata.QuotaEntityPart{Type: p.Type, Name: p.Name})
		}
		for _, op := range e.Ops {
			alts[i].Ops = append(alts[i].Ops, metadata.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		resp.Entries[i] = re
	}
	setErr := func(i int, code int16, msg *string) {
		resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = code, msg
	}
	if !r.allowedCluster(n.authorizer(), authz.OpAlterConfigs) {
		for i := range resp.Entries {
			setErr(i, kerr.ClusterAuthorizationFailed.Code, nil)
		}
		return encodeResponse(r, resp), nil
	}
	// The controller RPC is JSON, which has no NaN or infinities: such an
	// entry is refused here, the others go on.
	var send []metadata.QuotaAlteration
	var sent []int
	for i, a := range alts {
		finite := true
		for _, op := range a.Ops {
			if !op.Remove && (math.IsNaN(op.Value) || math.IsInf(op.Value, 0)) {
				finite = false
			}
		}
		if !finite {
			setErr(i, kerr.InvalidRequest.Code, kmsg.StringPtr("quota values must be finite numbers"))
			continue
		}
		send = append(send, a)
		sent = append(sent, i)
	}
	if len(send) == 0 {
		return encodeResponse(r, resp), nil
	}
	cctx, cancel := context.WithTimeout(ctx, aclWriteTimeout)
	defer cancel()
	results, err := n.svc.AlterClientQuotas(cctx, controller.AlterClientQuotasRequest{Entries: send, ValidateOnly: req.ValidateOnly})
	if err != nil {
		for _, i := range sent {
			setErr(i, errCode(err), kmsg.StringPtr(err.Error()))
		}
		return encodeResponse(r, resp), nil
	}
	// What the image must show once the applied entries are in it: each
	// key's last value in request order (nil: removed).
	type ek struct {
		e metadata.QuotaEntity
		k string
	}
	want := map[ek]*float64{}
	var applied []int
	for j, res := range results {
		i := sent[j]
		if res != nil {
			setErr(i, errCode(res), kmsg.StringPtr(kerrDetail(res)))
			continue
		}
		applied = append(applied, i)
		if req.ValidateOnly {
			continue
		}
		e, perr := metadata.ParseQuotaEntity(send[j].Entity)
		if perr != nil {
			continue // the controller accepted it: cannot happen
		}
		for _, op := range send[j].Ops {
			if op.Remove {
				want[ek{e, op.Key}] = nil
			} else {
				v := op.Value
				want[ek{e, op.Key}] = &v
			}
		}
	}
	if len(want) == 0 {
		return encodeResponse(r, resp), nil
	}
	seen := n.waitMetadata(cctx, func(st *metadata.State) bool {
		for k, v := range want {
			have, ok := st.ClientQuota(k.e, k.k)
			if ok != (v != nil) || (ok && have != *v) {
				return false
			}
		}
		return true
	})
	if !seen {
		for _, i := range applied {
			setErr(i, kerr.RequestTimedOut.Code, kmsg.StringPtr("altered, but not yet applied on this broker"))
		}
	}
	return encodeResponse(r, resp), nil
}

// kerrDetail is a planner error's message without the Kafka error's
// generic description (the code carries it), as Kafka's ApiError message.
func kerrDetail(err error) string {
	msg := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		if p := ke.Error() + ": "; len(msg) > len(p) && msg[:len(p)] == p {
			return msg[len(p):]
		}
	}
	return msg
}

func sortedQuotaKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
