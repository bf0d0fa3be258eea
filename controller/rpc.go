package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/uuid"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

// The controller's RPCs, each one entry of the table below. An entry
// names the RPC's wire method number, its planner (run on the leader's
// image through the one decider) and, when its result carries errors, the
// wire form of the result (rpc_wire.go). From the entry come:
//
//   - the server's dispatch on the CONTROLLER listener (server.go looks the
//     method number up in rpcsByMethod);
//   - the in-process call on the leader, and the forwarding to the leader
//     from a follower ([rpc.local], through decideRouted);
//   - the [Client] stub that sends it over the network ([rpc.remote]).
//
// So a new RPC is a planner with its request and response types in
// controller/metadata, a method number and an entry here, with its
// [Service] line and the two one-line methods beside the entry, and a
// golden in rpc_test.go. Watch is the one method outside the table: it
// streams deltas instead of answering once, from whichever controller it
// reached (watch.go).

// Method numbers of kindRequest (the byte after the frame kind; see
// wire.go). They are the wire format: a number is never changed or reused,
// and a new RPC takes the next one.
const (
	methodRegisterBroker              byte = 1  // [Service.RegisterBroker]
	methodBrokerHeartbeat             byte = 2  // [Service.BrokerHeartbeat]
	methodCreateTopics                byte = 3  // [Service.CreateTopics]
	methodDeleteTopics                byte = 4  // [Service.DeleteTopics]
	methodCreatePartitions            byte = 5  // [Service.CreatePartitions]
	methodAlterConfigs                byte = 6  // [Service.AlterConfigs]
	methodAlterPartition              byte = 7  // [Service.AlterPartition]
	methodCommitRemoteSegment         byte = 8  // [Service.CommitRemoteSegment]
	methodWatch                       byte = 9  // [Service.Watch]: a stream, not in the table
	methodElectLeaders                byte = 10 // [Service.ElectLeaders]
	methodAlterPartitionReassignments byte = 11 // [Service.AlterPartitionReassignments]
	methodListPartitionReassignments  byte = 12 // [Service.ListPartitionReassignments]
	methodUnregisterBroker            byte = 13 // [Service.UnregisterBroker]
	methodCreateACLs                  byte = 14 // [Service.CreateACLs]
	methodDeleteACLs                  byte = 15 // [Service.DeleteACLs]
	methodAlterUserScramCredentials   byte = 16 // [Service.AlterUserScramCredentials]
	methodAlterClientQuotas           byte = 17 // [Service.AlterClientQuotas]
)

// Service is the API brokers use, implemented in-process by [*Controller]
// and over the CONTROLLER listener by [*Client]. Results and errors are
// those of controller/metadata's Plan* functions; routing failures are
// [NotControllerError] (retry) and kerr.RequestTimedOut.
type Service interface {
	RegisterBroker(ctx context.Context, req metadata.RegisterBrokerRequest) (metadata.RegisterBrokerResponse, error)
	BrokerHeartbeat(ctx context.Context, req metadata.BrokerHeartbeatRequest) (metadata.BrokerHeartbeatResponse, error)
	CreateTopics(ctx context.Context, req metadata.CreateTopicsRequest) ([]metadata.CreateTopicResult, error)
	DeleteTopics(ctx context.Context, names []string, ids []uuid.UUID) ([]metadata.DeleteTopicResult, error)
	CreatePartitions(ctx context.Context, req metadata.CreatePartitionsRequest) ([]metadata.CreatePartitionsResult, error)
	AlterConfigs(ctx context.Context, req metadata.AlterConfigsRequest) ([]metadata.AlterConfigsResult, error)
	AlterPartition(ctx context.Context, req metadata.AlterPartitionRequest) (metadata.AlterPartitionResult, error)
	CommitRemoteSegment(ctx context.Context, rec metadata.RemoteSegmentRecord) error
	ElectLeaders(ctx context.Context, req metadata.ElectLeadersRequest) ([]metadata.ElectLeadersResult, error)
	AlterPartitionReassignments(ctx context.Context, reqs []metadata.ReassignmentRequest) ([]metadata.ReassignmentResult, error)
	ListPartitionReassignments(ctx context.Context, req metadata.ListReassignmentsRequest) ([]metadata.OngoingReassignment, error)
	UnregisterBroker(ctx context.Context, brokerID int32) error
	CreateACLs(ctx context.Context, acls []authz.ACL) ([]metadata.CreateACLResult, error)
	DeleteACLs(ctx context.Context, filters []authz.Filter) ([]metadata.DeleteACLsResult, error)
	AlterUserScramCredentials(ctx context.Context, req AlterScramRequest) ([]metadata.AlterScramResult, error)
	AlterClientQuotas(ctx context.Context, req AlterClientQuotasRequest) ([]error, error)
	Watch(ctx context.Context, fromOffset int64) (Watcher, error)
}

var (
	_ Service = (*Controller)(nil)
	_ Service = (*Client)(nil)
)

// rpc is one entry of the table: an RPC whose request is Req (JSON on the
// wire), whose result is Res, sent as W.
type rpc[Req, Res, W any] struct {
	method byte
	name   string
	// plan decides req against the leader's image st (as extended by the
	// decisions batched ahead of it); it must not keep st.
	plan func(c *Controller, st *metadata.State, req Req) ([]metadata.Record, Res, error)
	// steps, if set instead of plan, plans req in steps: it returns the
	// step, which the leader runs as one decision after another (each
	// step's records their own entry, other decisions free to run
	// between them) until it reports done; the result is the last
	// step's. For requests too large for one decision (ElectLeaders of
	// every partition).
	steps func(c *Controller, req Req) func(st *metadata.State) ([]metadata.Record, Res, bool, error)
	// applied, if set, runs on the leader once the planned records are
	// applied and the plan did not fail.
	applied func(c *Controller, req Req)
	// toWire and fromWire convert the result for the wire; nil when W is
	// Res itself (a result without errors in it).
	toWire   func(Res) W
	fromWire func(W) Res
}

// rpcEntry is what the server needs of an entry.
type rpcEntry interface {
	// serve answers one request body on the CONTROLLER listener; fwd is
	// the request's forwarded flag.
	serve(ctx context.Context, c *Controller, fwd bool, body []byte) response
}

// rpcsByMethod is the table by method number, filled by register.
var rpcsByMethod = map[byte]rpcEntry{}

// register adds an entry to the table. A number taken twice (or Watch's)
// panics at init, so every test catches it.
func register[Req, Res, W any](r *rpc[Req, Res, W]) *rpc[Req, Res, W] {
	if _, dup := rpcsByMethod[r.method]; dup || r.method == methodWatch || r.method == 0 {
		panic(fmt.Sprintf("controller: rpc %s: method number %d taken", r.name, r.method))
	}
	if (r.toWire == nil) != (r.fromWire == nil) {
		panic(fmt.Sprintf("controller: rpc %s: toWire and fromWire go together", r.name))
	}
	if r.toWire == nil && reflect.TypeFor[W]() != reflect.TypeFor[Res]() {
		panic(fmt.Sprintf("controller: rpc %s: a result sent as another type needs toWire and fromWire", r.name))
	}
	rpcsByMethod[r.method] = r
	return r
}

// local runs req on this controller: planned and proposed on the leader;
// on a follower forwarded to the leader, unless fwd (it was itself
// forwarded: it is never forwarded twice).
func (r *rpc[Req, Res, W]) local(ctx context.Context, c *Controller, req Req, fwd bool) (Res, error) {
	var onApplied func()
	if r.applied != nil {
		onApplied = func() { r.applied(c, req) }
	}
	newStep := func() func(st *metadata.State) ([]metadata.Record, Res, bool, error) {
		if r.steps != nil {
			return r.steps(c, req)
		}
		return func(st *metadata.State) ([]metadata.Record, Res, bool, error) {
			recs, res, err := r.plan(c, st, req)
			return recs, res, true, err
		}
	}
	return decideRouted(ctx, c, fwd, newStep, onApplied, func(ctx context.Context, cl *Client) (Res, error) {
		return r.remote(ctx, cl, req)
	})
}

// remote sends req through cl (retrying as [Client] does).
func (r *rpc[Req, Res, W]) remote(ctx context.Context, cl *Client, req Req) (Res, error) {
	var w W
	if err := cl.call(ctx, r.method, req, &w); err != nil {
		var zero Res
		return zero, err
	}
	if r.fromWire == nil {
		return any(w).(Res), nil
	}
	return r.fromWire(w), nil
}

func (r *rpc[Req, Res, W]) serve(ctx context.Context, c *Controller, fwd bool, body []byte) response {
	var req Req
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest(err)
	}
	res, err := r.local(ctx, c, req, fwd)
	if err != nil {
		return response{Err: toWireErr(err)}
	}
	if r.toWire == nil {
		return response{Body: res}
	}
	return response{Body: r.toWire(res)}
}

// badRequest answers a request that does not decode.
func badRequest(err error) response {
	return response{Err: toWireErr(fmt.Errorf("%w: %v", ErrProtocol, err))}
}

// The table. Each entry is followed by its Controller and Client methods.

var rpcRegisterBroker = register(&rpc[metadata.RegisterBrokerRequest, metadata.RegisterBrokerResponse, metadata.RegisterBrokerResponse]{
	method: methodRegisterBroker, name: "RegisterBroker",
	plan: func(c *Controller, st *metadata.State, req metadata.RegisterBrokerRequest) ([]metadata.Record, metadata.RegisterBrokerResponse, error) {
		b, ok := st.Broker(req.BrokerID)
		req.ExistingSessionAlive = ok && !b.Fenced && c.live.alive(req.BrokerID)
		return st.PlanRegisterBroker(req)
	},
	applied: func(c *Controller, req metadata.RegisterBrokerRequest) { c.live.touch(req.BrokerID) },
})

// RegisterBroker registers a broker (Kafka's BrokerRegistration); the
// broker starts fenced and is unfenced by a heartbeat once caught up. Its
// session starts now. Errors: those of metadata.State.PlanRegisterBroker,
// [NotControllerError], kerr.RequestTimedOut.
func (c *Controller) RegisterBroker(ctx context.Context, req metadata.RegisterBrokerRequest) (metadata.RegisterBrokerResponse, error) {
	return rpcRegisterBroker.local(ctx, c, req, false)
}

// RegisterBroker implements [Service].
func (c *Client) RegisterBroker(ctx context.Context, req metadata.RegisterBrokerRequest) (metadata.RegisterBrokerResponse, error) {
	return rpcRegisterBroker.remote(ctx, c, req)
}

var rpcBrokerHeartbeat = register(&rpc[metadata.BrokerHeartbeatRequest, metadata.BrokerHeartbeatResponse, metadata.BrokerHeartbeatResponse]{
	method: methodBrokerHeartbeat, name: "BrokerHeartbeat",
	plan: func(c *Controller, st *metadata.State, req metadata.BrokerHeartbeatRequest) ([]metadata.Record, metadata.BrokerHeartbeatResponse, error) {
		recs, res, err := st.PlanBrokerHeartbeat(req)
		res.MetadataOffset = c.fsm.recordsAt.Load() // the leader's, where plans run
		return recs, res, err
	},
	applied: func(c *Controller, req metadata.BrokerHeartbeatRequest) { c.live.touch(req.BrokerID) },
})

// BrokerHeartbeat renews a broker's session and may fence, unfence or
// shut it down (metadata.State.PlanBrokerHeartbeat).
func (c *Controller) BrokerHeartbeat(ctx context.Context, req metadata.BrokerHeartbeatRequest) (metadata.BrokerHeartbeatResponse, error) {
	return rpcBrokerHeartbeat.local(ctx, c, req, false)
}

// BrokerHeartbeat implements [Service].
func (c *Client) BrokerHeartbeat(ctx context.Context, req metadata.BrokerHeartbeatRequest) (metadata.BrokerHeartbeatResponse, error) {
	return rpcBrokerHeartbeat.remote(ctx, c, req)
}

var rpcCreateTopics = register(&rpc[metadata.CreateTopicsRequest, []metadata.CreateTopicResult, []createTopicResultW]{
	method: methodCreateTopics, name: "CreateTopics",
	plan: func(c *Controller, st *metadata.State, req metadata.CreateTopicsRequest) ([]metadata.Record, []metadata.CreateTopicResult, error) {
		recs, res := st.PlanCreateTopics(req, c.rng)
		return recs, res, nil
	},
	toWire: createTopicsToW, fromWire: createTopicsFromW,
})

// CreateTopics creates topics with replicas placed over live, unfenced
// brokers (rack-aware). Per-topic errors are in the results.
func (c *Controller) CreateTopics(ctx context.Context, req metadata.CreateTopicsRequest) ([]metadata.CreateTopicResult, error) {
	return rpcCreateTopics.local(ctx, c, req, false)
}

// CreateTopics implements [Service].
func (c *Client) CreateTopics(ctx context.Context, req metadata.CreateTopicsRequest) ([]metadata.CreateTopicResult, error) {
	return rpcCreateTopics.remote(ctx, c, req)
}

var rpcDeleteTopics = register(&rpc[deleteTopicsReq, []metadata.DeleteTopicResult, []deleteTopicResultW]{
	method: methodDeleteTopics, name: "DeleteTopics",
	plan: func(_ *Controller, st *metadata.State, req deleteTopicsReq) ([]metadata.Record, []metadata.DeleteTopicResult, error) {
		recs, res := st.PlanDeleteTopics(req.Names, req.IDs)
		return recs, res, nil
	},
	toWire: deleteTopicsToW, fromWire: deleteTopicsFromW,
})

// DeleteTopics deletes topics by name or id.
func (c *Controller) DeleteTopics(ctx context.Context, names []string, ids []uuid.UUID) ([]metadata.DeleteTopicResult, error) {
	return rpcDeleteTopics.local(ctx, c, deleteTopicsReq{Names: names, IDs: ids}, false)
}

// DeleteTopics implements [Service].
func (c *Client) DeleteTopics(ctx context.Context, names []string, ids []uuid.UUID) ([]metadata.DeleteTopicResult, error) {
	return rpcDeleteTopics.remote(ctx, c, deleteTopicsReq{Names: names, IDs: ids})
}

var rpcCreatePartitions = register(&rpc[metadata.CreatePartitionsRequest, []metadata.CreatePartitionsResult, []nameResultW]{
	method: methodCreatePartitions, name: "CreatePartitions",
	plan: func(c *Controller, st *metadata.State, req metadata.CreatePartitionsRequest) ([]metadata.Record, []metadata.CreatePartitionsResult, error) {
		recs, res := st.PlanCreatePartitions(req, c.rng)
		return recs, res, nil
	},
	toWire: createPartitionsToW, fromWire: createPartitionsFromW,
})

// CreatePartitions grows topics.
func (c *Controller) CreatePartitions(ctx context.Context, req metadata.CreatePartitionsRequest) ([]metadata.CreatePartitionsResult, error) {
	return rpcCreatePartitions.local(ctx, c, req, false)
}

// CreatePartitions implements [Service].
func (c *Client) CreatePartitions(ctx context.Context, req metadata.CreatePartitionsRequest) ([]metadata.CreatePartitionsResult, error) {
	return rpcCreatePartitions.remote(ctx, c, req)
}

var rpcAlterConfigs = register(&rpc[metadata.AlterConfigsRequest, []metadata.AlterConfigsResult, []nameResultW]{
	method: methodAlterConfigs, name: "AlterConfigs",
	plan: func(_ *Controller, st *metadata.State, req metadata.AlterConfigsRequest) ([]metadata.Record, []metadata.AlterConfigsResult, error) {
		recs, res := st.PlanAlterConfigs(req)
		return recs, res, nil
	},
	toWire: alterConfigsToW, fromWire: alterConfigsFromW,
})

// AlterConfigs changes topic or broker configs, incrementally or by full
// replacement (req.Incremental), after validation.
func (c *Controller) AlterConfigs(ctx context.Context, req metadata.AlterConfigsRequest) ([]metadata.AlterConfigsResult, error) {
	return rpcAlterConfigs.local(ctx, c, req, false)
}

// AlterConfigs implements [Service].
func (c *Client) AlterConfigs(ctx context.Context, req metadata.AlterConfigsRequest) ([]metadata.AlterConfigsResult, error) {
	return rpcAlterConfigs.remote(ctx, c, req)
}

var rpcAlterPartition = register(&rpc[metadata.AlterPartitionRequest, metadata.AlterPartitionResult, alterPartitionResultW]{
	method: methodAlterPartition, name: "AlterPartition",
	plan: func(_ *Controller, st *metadata.State, req metadata.AlterPartitionRequest) ([]metadata.Record, metadata.AlterPartitionResult, error) {
		recs, res := st.PlanAlterPartition(req)
		return recs, res, nil
	},
	toWire: alterPartitionToW, fromWire: alterPartitionFromW,
})

// AlterPartition applies a partition leader's ISR change, refused when the
// leader's leader epoch or partition epoch is stale.
func (c *Controller) AlterPartition(ctx context.Context, req metadata.AlterPartitionRequest) (metadata.AlterPartitionResult, error) {
	return rpcAlterPartition.local(ctx, c, req, false)
}

// AlterPartition implements [Service].
func (c *Client) AlterPartition(ctx context.Context, req metadata.AlterPartitionRequest) (metadata.AlterPartitionResult, error) {
	return rpcAlterPartition.remote(ctx, c, req)
}

var rpcCommitRemoteSegment = register(&rpc[metadata.RemoteSegmentRecord, struct{}, struct{}]{
	method: methodCommitRemoteSegment, name: "CommitRemoteSegment",
	plan: func(_ *Controller, st *metadata.State, rec metadata.RemoteSegmentRecord) ([]metadata.Record, struct{}, error) {
		recs, err := st.PlanRemoteSegment(rec)
		return recs, struct{}{}, err
	},
})

// CommitRemoteSegment records a remote-segment state transition (legal
// transitions only; repeating the current state is a no-op).
func (c *Controller) CommitRemoteSegment(ctx context.Context, rec metadata.RemoteSegmentRecord) error {
	_, err := rpcCommitRemoteSegment.local(ctx, c, rec, false)
	return err
}

// CommitRemoteSegment implements [Service].
func (c *Client) CommitRemoteSegment(ctx context.Context, rec metadata.RemoteSegmentRecord) error {
	_, err := rpcCommitRemoteSegment.remote(ctx, c, rec)
	return err
}

var rpcUnregisterBroker = register(&rpc[int32, struct{}, struct{}]{
	method: methodUnregisterBroker, name: "UnregisterBroker",
	plan: func(_ *Controller, st *metadata.State, id int32) ([]metadata.Record, struct{}, error) {
		recs, err := st.PlanUnregisterBroker(id)
		return recs, struct{}{}, err
	},
})

// UnregisterBroker removes a broker's registration (Kafka's
// UnregisterBroker), taking it out of every ISR and leadership first
// (metadata.State.PlanUnregisterBroker).
func (c *Controller) UnregisterBroker(ctx context.Context, brokerID int32) error {
	_, err := rpcUnregisterBroker.local(ctx, c, brokerID, false)
	return err
}

// UnregisterBroker implements [Service].
func (c *Client) UnregisterBroker(ctx context.Context, brokerID int32) error {
	_, err := rpcUnregisterBroker.remote(ctx, c, brokerID)
	return err
}

var rpcElectLeaders = register(&rpc[metadata.ElectLeadersRequest, []metadata.ElectLeadersResult, []electLeadersResultW]{
	method: methodElectLeaders, name: "ElectLeaders",
	steps: func(_ *Controller, req metadata.ElectLeadersRequest) func(st *metadata.State) ([]metadata.Record, []metadata.ElectLeadersResult, bool, error) {
		p := metadata.NewElectLeadersPlan(req)
		return func(st *metadata.State) ([]metadata.Record, []metadata.ElectLeadersResult, bool, error) {
			recs := p.Step(st, metadata.MaxElectionsPerStep)
			return recs, p.Results(), p.Done(), nil
		}
	},
	toWire: electLeadersToW, fromWire: electLeadersFromW,
})

// ElectLeaders runs preferred or unclean leader elections (Kafka's
// ElectLeaders); per-partition errors are those of
// metadata.State.PlanElectLeaders. The leader plans and commits them in
// steps of at most metadata.MaxElectionsPerStep partitions
// (metadata.ElectLeadersPlan), so a request over every partition of a
// large cluster neither holds the decider nor makes one huge entry; it
// answers once the last step is applied.
func (c *Controller) ElectLeaders(ctx context.Context, req metadata.ElectLeadersRequest) ([]metadata.ElectLeadersResult, error) {
	return rpcElectLeaders.local(ctx, c, req, false)
}

// ElectLeaders implements [Service].
func (c *Client) ElectLeaders(ctx context.Context, req metadata.ElectLeadersRequest) ([]metadata.ElectLeadersResult, error) {
	return rpcElectLeaders.remote(ctx, c, req)
}

var rpcAlterPartitionReassignments = register(&rpc[[]metadata.ReassignmentRequest, []metadata.ReassignmentResult, []reassignmentResultW]{
	method: methodAlterPartitionReassignments, name: "AlterPartitionReassignments",
	plan: func(_ *Controller, st *metadata.State, reqs []metadata.ReassignmentRequest) ([]metadata.Record, []metadata.ReassignmentResult, error) {
		recs, res := st.PlanReassignments(reqs)
		return recs, res, nil
	},
	toWire: reassignmentsToW, fromWire: reassignmentsFromW,
})

// AlterPartitionReassignments starts, replaces or (Replicas nil) cancels
// partition reassignments (KIP-455); per-partition errors are in the
// results (metadata.State.PlanReassignments).
func (c *Controller) AlterPartitionReassignments(ctx context.Context, reqs []metadata.ReassignmentRequest) ([]metadata.ReassignmentResult, error) {
	return rpcAlterPartitionReassignments.local(ctx, c, reqs, false)
}

// AlterPartitionReassignments implements [Service].
func (c *Client) AlterPartitionReassignments(ctx context.Context, reqs []metadata.ReassignmentRequest) ([]metadata.ReassignmentResult, error) {
	return rpcAlterPartitionReassignments.remote(ctx, c, reqs)
}

var rpcListPartitionReassignments = register(&rpc[metadata.ListReassignmentsRequest, []metadata.OngoingReassignment, []metadata.OngoingReassignment]{
	method: methodListPartitionReassignments, name: "ListPartitionReassignments",
	plan: func(_ *Controller, st *metadata.State, req metadata.ListReassignmentsRequest) ([]metadata.Record, []metadata.OngoingReassignment, error) {
		return nil, st.ListReassignments(req), nil
	},
})

// ListPartitionReassignments lists the reassignments in progress, as the
// controller leader's image has them.
func (c *Controller) ListPartitionReassignments(ctx context.Context, req metadata.ListReassignmentsRequest) ([]metadata.OngoingReassignment, error) {
	return rpcListPartitionReassignments.local(ctx, c, req, false)
}

// ListPartitionReassignments implements [Service].
func (c *Client) ListPartitionReassignments(ctx context.Context, req metadata.ListReassignmentsRequest) ([]metadata.OngoingReassignment, error) {
	return rpcListPartitionReassignments.remote(ctx, c, req)
}

var rpcCreateACLs = register(&rpc[[]authz.ACL, []metadata.CreateACLResult, []errResultW]{
	method: methodCreateACLs, name: "CreateACLs",
	plan: func(c *Controller, st *metadata.State, acls []authz.ACL) ([]metadata.Record, []metadata.CreateACLResult, error) {
		recs, res := st.PlanCreateACLs(acls, c.rng)
		return recs, res, nil
	},
	toWire: createACLsToW, fromWire: createACLsFromW,
})

// CreateACLs adds ACL bindings (Kafka's CreateAcls); per-binding errors
// (INVALID_REQUEST) are in the results, one per binding.
func (c *Controller) CreateACLs(ctx context.Context, acls []authz.ACL) ([]metadata.CreateACLResult, error) {
	return rpcCreateACLs.local(ctx, c, acls, false)
}

// CreateACLs implements [Service].
func (c *Client) CreateACLs(ctx context.Context, acls []authz.ACL) ([]metadata.CreateACLResult, error) {
	return rpcCreateACLs.remote(ctx, c, acls)
}

var rpcDeleteACLs = register(&rpc[[]authz.Filter, []metadata.DeleteACLsResult, []deleteACLsResultW]{
	method: methodDeleteACLs, name: "DeleteACLs",
	plan: func(_ *Controller, st *metadata.State, filters []authz.Filter) ([]metadata.Record, []metadata.DeleteACLsResult, error) {
		recs, res := st.PlanDeleteACLs(filters)
		return recs, res, nil
	},
	toWire: deleteACLsToW, fromWire: deleteACLsFromW,
})

// DeleteACLs removes the ACLs matching each filter (Kafka's DeleteAcls);
// each result lists its filter's matches.
func (c *Controller) DeleteACLs(ctx context.Context, filters []authz.Filter) ([]metadata.DeleteACLsResult, error) {
	return rpcDeleteACLs.local(ctx, c, filters, false)
}

// DeleteACLs implements [Service].
func (c *Client) DeleteACLs(ctx context.Context, filters []authz.Filter) ([]metadata.DeleteACLsResult, error) {
	return rpcDeleteACLs.remote(ctx, c, filters)
}

// AlterScramRequest is an AlterUserScramCredentials (KIP-554): the
// upsertions carry the client's salted password, from which the planner
// derives the stored keys; the records never carry it.
type AlterScramRequest struct {
	Deletions  []metadata.ScramDeletion  `json:"deletions,omitempty"`
	Upsertions []metadata.ScramUpsertion `json:"upsertions,omitempty"`
}

var rpcAlterUserScramCredentials = register(&rpc[AlterScramRequest, []metadata.AlterScramResult, []alterScramResultW]{
	method: methodAlterUserScramCredentials, name: "AlterUserScramCredentials",
	plan: func(_ *Controller, st *metadata.State, req AlterScramRequest) ([]metadata.Record, []metadata.AlterScramResult, error) {
		recs, res := st.PlanAlterUserScramCredentials(req.Deletions, req.Upsertions)
		return recs, res, nil
	},
	toWire: alterScramToW, fromWire: alterScramFromW,
})

// AlterUserScramCredentials deletes and upserts SCRAM credentials (Kafka's
// AlterUserScramCredentials); one result per user.
func (c *Controller) AlterUserScramCredentials(ctx context.Context, req AlterScramRequest) ([]metadata.AlterScramResult, error) {
	return rpcAlterUserScramCredentials.local(ctx, c, req, false)
}

// AlterUserScramCredentials implements [Service].
func (c *Client) AlterUserScramCredentials(ctx context.Context, req AlterScramRequest) ([]metadata.AlterScramResult, error) {
	return rpcAlterUserScramCredentials.remote(ctx, c, req)
}

// AlterClientQuotasRequest is an AlterClientQuotas: its entries and
// validate_only.
type AlterClientQuotasRequest struct {
	Entries      []metadata.QuotaAlteration `json:"entries"`
	ValidateOnly bool                       `json:"validate_only,omitempty"`
}

var rpcAlterClientQuotas = register(&rpc[AlterClientQuotasRequest, []error, []errResultW]{
	method: methodAlterClientQuotas, name: "AlterClientQuotas",
	plan: func(_ *Controller, st *metadata.State, req AlterClientQuotasRequest) ([]metadata.Record, []error, error) {
		recs, res := st.PlanAlterClientQuotas(req.Entries, req.ValidateOnly)
		return recs, res, nil
	},
	toWire: errsToW, fromWire: errsFromW,
})

// AlterClientQuotas sets and removes client quotas (Kafka's
// AlterClientQuotas); one error per entry (INVALID_REQUEST), nil for an
// entry applied (or, validate-only, valid).
func (c *Controller) AlterClientQuotas(ctx context.Context, req AlterClientQuotasRequest) ([]error, error) {
	return rpcAlterClientQuotas.local(ctx, c, req, false)
}

// AlterClientQuotas implements [Service].
func (c *Client) AlterClientQuotas(ctx context.Context, req AlterClientQuotasRequest) ([]error, error) {
	return rpcAlterClientQuotas.remote(ctx, c, req)
}
