package controller

import (
	"bufio"
	"context"
	"errors"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

// TestRPCMethodNumbersArePinned: the method byte of every RPC is part of
// the wire format between brokers and controllers of different versions. A
// number never changes and is never reused.
func TestRPCMethodNumbersArePinned(t *testing.T) {
	want := map[string]byte{
		"RegisterBroker":              1,
		"BrokerHeartbeat":             2,
		"CreateTopics":                3,
		"DeleteTopics":                4,
		"CreatePartitions":            5,
		"AlterConfigs":                6,
		"AlterPartition":              7,
		"CommitRemoteSegment":         8,
		"Watch":                       9,
		"ElectLeaders":                10,
		"AlterPartitionReassignments": 11,
		"ListPartitionReassignments":  12,
		"CreateACLs":                  14,
		"DeleteACLs":                  15,
		"AlterUserScramCredentials":   16,
		"AlterClientQuotas":           17,
	}
	got := map[string]byte{
		"RegisterBroker":              methodRegisterBroker,
		"BrokerHeartbeat":             methodBrokerHeartbeat,
		"CreateTopics":                methodCreateTopics,
		"DeleteTopics":                methodDeleteTopics,
		"CreatePartitions":            methodCreatePartitions,
		"AlterConfigs":                methodAlterConfigs,
		"AlterPartition":              methodAlterPartition,
		"CommitRemoteSegment":         methodCommitRemoteSegment,
		"Watch":                       methodWatch,
		"ElectLeaders":                methodElectLeaders,
		"AlterPartitionReassignments": methodAlterPartitionReassignments,
		"ListPartitionReassignments":  methodListPartitionReassignments,
		"CreateACLs":                  methodCreateACLs,
		"DeleteACLs":                  methodDeleteACLs,
		"AlterUserScramCredentials":   methodAlterUserScramCredentials,
		"AlterClientQuotas":           methodAlterClientQuotas,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("method numbers changed:\n got %v\nwant %v", got, want)
	}
	// Every Service method but Watch (a stream) is one entry of the table,
	// under its number.
	if n := reflect.TypeFor[Service]().NumMethod() - 1; len(rpcsByMethod) != n {
		t.Fatalf("%d rpc table entries for %d Service methods besides Watch", len(rpcsByMethod), n)
	}
	for name, m := range want {
		if _, ok := rpcsByMethod[m]; ok == (name == "Watch") {
			t.Errorf("%s (method %d): in the rpc table %v", name, m, ok)
		}
	}
}

func TestRPCRegisterRefusesATakenNumber(t *testing.T) {
	before := len(rpcsByMethod)
	for _, m := range []byte{0, methodCreateTopics, methodWatch} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("method %d registered", m)
				}
			}()
			register(&rpc[struct{}, struct{}, struct{}]{method: m, name: "Dup"})
		}()
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a result sent as another type registered without conversions")
			}
		}()
		register(&rpc[struct{}, int, string]{method: 250, name: "NoConversion"})
	}()
	if len(rpcsByMethod) != before {
		t.Fatalf("a refused entry changed the table: %d entries", len(rpcsByMethod))
	}
}

// rpcRecorder is a CONTROLLER listener that records each request frame and
// answers it with a canned response payload.
type rpcRecorder struct {
	t  *testing.T
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	frames [][]byte // kind byte + payload of every request frame
	answer []byte   // the next response frame's kind byte + payload
}

func newRPCRecorder(t *testing.T) *rpcRecorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rpcRecorder{t: t, ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for conn, err := ln.Accept(); err == nil; conn, err = ln.Accept() {
			r.wg.Add(1)
			go r.serve(conn)
		}
	}()
	t.Cleanup(func() { ln.Close(); r.wg.Wait() })
	return r
}

func (r *rpcRecorder) serve(conn net.Conn) {
	defer r.wg.Done()
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testWait))
	br, bw := bufio.NewReader(conn), bufio.NewWriter(conn)
	for {
		kind, payload, err := readFrame(br)
		if err != nil {
			return
		}
		if kind == kindClientHello {
			continue
		}
		r.mu.Lock()
		r.frames = append(r.frames, append([]byte{kind}, payload...))
		answer := r.answer
		r.mu.Unlock()
		if writeFrame(bw, answer[0], answer[1:]) != nil || bw.Flush() != nil {
			return
		}
	}
}

func (r *rpcRecorder) expect(kind byte, payload string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = nil
	r.answer = append([]byte{kind}, payload...)
}

func (r *rpcRecorder) recorded() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.frames
}

var (
	goldenID  = uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	goldenSeg = uuid.MustParse("f47ac10b-58cc-4372-a567-0e02b2c3d479")
)

// rpcGolden is one RPC on the wire: what the Client sends for a call, the
// response payload the controller answers, and what the call returns.
type rpcGolden struct {
	name     string
	call     func(ctx context.Context, cl *Client) (any, error)
	method   byte
	request  string // the JSON body after method and flags
	response string // the kindResponse payload
	want     any
	wantErr  error
}

func rpcGoldens() []rpcGolden {
	val := "1000"
	return []rpcGolden{
		{
			name: "RegisterBroker",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.RegisterBroker(ctx, metadata.RegisterBrokerRequest{BrokerID: 101, IncarnationID: goldenID,
					Listeners: []metadata.Listener{{Name: "PLAINTEXT", Host: "127.0.0.1", Port: 9092, SecurityProtocol: "PLAINTEXT"}},
					Rack:      "r1", ClusterID: "c1"})
			},
			method:   1,
			request:  `{"BrokerID":101,"IncarnationID":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","Listeners":[{"Name":"PLAINTEXT","Host":"127.0.0.1","Port":9092,"SecurityProtocol":"PLAINTEXT"}],"Rack":"r1","ClusterID":"c1","ExistingSessionAlive":false}`,
			response: `{"body":{"BrokerEpoch":7,"ClusterID":"c1"}}`,
			want:     metadata.RegisterBrokerResponse{BrokerEpoch: 7, ClusterID: "c1"},
		},
		{
			name: "BrokerHeartbeat",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.BrokerHeartbeat(ctx, metadata.BrokerHeartbeatRequest{BrokerID: 101, BrokerEpoch: 7, CurrentMetadataOffset: 42, WantShutDown: true})
			},
			method:   2,
			request:  `{"BrokerID":101,"BrokerEpoch":7,"CurrentMetadataOffset":42,"WantFence":false,"WantShutDown":true}`,
			response: `{"body":{"IsCaughtUp":true,"IsFenced":false,"ShouldShutDown":true}}`,
			want:     metadata.BrokerHeartbeatResponse{IsCaughtUp: true, ShouldShutDown: true},
		},
		{
			name: "CreateTopics",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.CreateTopics(ctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "t", NumPartitions: 2, ReplicationFactor: 1,
					Configs: map[string]string{"retention.ms": val}}}, DefaultPartitions: 1})
			},
			method:   3,
			request:  `{"Topics":[{"Name":"t","NumPartitions":2,"ReplicationFactor":1,"Assignments":null,"Configs":{"retention.ms":"1000"}}],"ValidateOnly":false,"DefaultPartitions":1,"DefaultReplicationFactor":0}`,
			response: `{"body":[{"name":"t","topic_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","num_partitions":2,"replication_factor":1,"configs":{"retention.ms":"1000"}},{"name":"u","topic_id":"00000000-0000-0000-0000-000000000000","err":{"code":36,"msg":"exists"},"num_partitions":0,"replication_factor":0}]}`,
			want: []metadata.CreateTopicResult{
				{Name: "t", TopicID: goldenID, NumPartitions: 2, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1000"}},
				{Name: "u", Err: &RemoteError{Code: 36, Msg: "exists"}},
			},
		},
		{
			name: "DeleteTopics",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.DeleteTopics(ctx, []string{"t"}, []uuid.UUID{goldenID})
			},
			method:   4,
			request:  `{"names":["t"],"ids":["6ba7b810-9dad-11d1-80b4-00c04fd430c8"]}`,
			response: `{"body":[{"name":"t","topic_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8"},{"name":"","topic_id":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","err":{"code":100,"msg":"no id"}}]}`,
			want: []metadata.DeleteTopicResult{
				{Name: "t", TopicID: goldenID},
				{TopicID: goldenID, Err: &RemoteError{Code: 100, Msg: "no id"}},
			},
		},
		{
			name: "CreatePartitions",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.CreatePartitions(ctx, metadata.CreatePartitionsRequest{Topics: []metadata.CreatePartitionsTopic{{Name: "t", Count: 4}}, ValidateOnly: true})
			},
			method:   5,
			request:  `{"Topics":[{"Name":"t","Count":4,"Assignments":null}],"ValidateOnly":true}`,
			response: `{"body":[{"name":"t","err":{"code":37,"msg":"fewer"}}]}`,
			want:     []metadata.CreatePartitionsResult{{Name: "t", Err: &RemoteError{Code: 37, Msg: "fewer"}}},
		},
		{
			name: "AlterConfigs",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.AlterConfigs(ctx, metadata.AlterConfigsRequest{Resources: []metadata.AlterConfigResource{{Type: metadata.ResourceTopic, Name: "t",
					Configs: []metadata.AlterConfigEntry{{Name: "retention.ms", Op: metadata.OpSet, Value: &val}}}}, Incremental: true})
			},
			method:   6,
			request:  `{"Resources":[{"Type":2,"Name":"t","Configs":[{"Name":"retention.ms","Value":"1000","Op":0}]}],"Incremental":true,"ValidateOnly":false}`,
			response: `{"body":[{"type":2,"name":"t"}]}`,
			want:     []metadata.AlterConfigsResult{{Type: metadata.ResourceTopic, Name: "t"}},
		},
		{
			name: "AlterPartition",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.AlterPartition(ctx, metadata.AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 7, TopicID: goldenID, Partition: 3,
					LeaderEpoch: 2, PartitionEpoch: 5, NewISR: []int32{1, 2}})
			},
			method:   7,
			request:  `{"BrokerID":1,"BrokerEpoch":7,"TopicID":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","Partition":3,"LeaderEpoch":2,"PartitionEpoch":5,"NewISR":[1,2]}`,
			response: `{"body":{"leader":1,"leader_epoch":2,"partition_epoch":6,"isr":[1,2]}}`,
			want:     metadata.AlterPartitionResult{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 6, ISR: []int32{1, 2}},
		},
		{
			// AlterPartition v3 (KIP-903, KIP-704): members with broker
			// epochs, a recovery state, and a RECOVERING answer.
			name: "AlterPartition",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.AlterPartition(ctx, metadata.AlterPartitionRequest{BrokerID: 1, BrokerEpoch: 7, TopicID: goldenID, Partition: 3,
					LeaderEpoch: 2, PartitionEpoch: 5, NewISRWithEpochs: []metadata.ISRMember{{BrokerID: 1, BrokerEpoch: 7}, {BrokerID: 2, BrokerEpoch: -1}},
					LeaderRecoveryState: metadata.LeaderRecovering})
			},
			method:   7,
			request:  `{"BrokerID":1,"BrokerEpoch":7,"TopicID":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","Partition":3,"LeaderEpoch":2,"PartitionEpoch":5,"NewISR":null,"NewISRWithEpochs":[{"BrokerID":1,"BrokerEpoch":7},{"BrokerID":2,"BrokerEpoch":-1}],"LeaderRecoveryState":1}`,
			response: `{"body":{"leader":1,"leader_epoch":2,"partition_epoch":5,"isr":[1],"leader_recovery_state":1}}`,
			want:     metadata.AlterPartitionResult{Leader: 1, LeaderEpoch: 2, PartitionEpoch: 5, ISR: []int32{1}, LeaderRecoveryState: metadata.LeaderRecovering},
		},
		{
			name: "CommitRemoteSegment",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return nil, cl.CommitRemoteSegment(ctx, metadata.RemoteSegmentRecord{SegmentID: goldenSeg, TopicID: goldenID, Partition: 1,
					BaseOffset: 10, EndOffset: 19, MaxTimestamp: 5, SizeBytes: 100, State: metadata.CopyFinished, BrokerID: 1, EventTimestamp: 6, WriterLeaderEpoch: 4})
			},
			method:   8,
			request:  `{"SegmentID":"f47ac10b-58cc-4372-a567-0e02b2c3d479","TopicID":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","Partition":1,"BaseOffset":10,"EndOffset":19,"MaxTimestamp":5,"LeaderEpochs":null,"SizeBytes":100,"State":1,"BrokerID":1,"EventTimestamp":6,"WriterLeaderEpoch":4}`,
			response: `{"err":{"code":42,"msg":"illegal transition"}}`,
			wantErr:  &RemoteError{Code: 42, Msg: "illegal transition"},
		},
		{
			name: "ElectLeaders",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.ElectLeaders(ctx, metadata.ElectLeadersRequest{Type: metadata.ElectUnclean,
					Topics: []metadata.ElectLeadersTopic{{Name: "t", Partitions: []int32{0, 1}}}})
			},
			method:   10,
			request:  `{"Type":1,"Topics":[{"Name":"t","Partitions":[0,1]}]}`,
			response: `{"body":[{"topic":"t","partitions":[{"partition":0},{"partition":1,"err":{"code":84,"msg":"has a leader"}}]}]}`,
			want: []metadata.ElectLeadersResult{{Topic: "t", Partitions: []metadata.ElectLeadersPartitionResult{
				{Partition: 0}, {Partition: 1, Err: &RemoteError{Code: 84, Msg: "has a leader"}}}}},
		},
		{
			// Null topics (every partition) stay null on the wire.
			name: "ElectLeaders",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.ElectLeaders(ctx, metadata.ElectLeadersRequest{Type: metadata.ElectPreferred})
			},
			method:   10,
			request:  `{"Type":0,"Topics":null}`,
			response: `{"body":[{"topic":"t","partitions":[]}]}`,
			want:     []metadata.ElectLeadersResult{{Topic: "t", Partitions: []metadata.ElectLeadersPartitionResult{}}},
		},
		{
			// A reassignment and a cancel (null replicas).
			name: "AlterPartitionReassignments",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.AlterPartitionReassignments(ctx, []metadata.ReassignmentRequest{{Topic: "t", Partition: 0, Replicas: []int32{2, 3}}, {Topic: "t", Partition: 1}})
			},
			method:   11,
			request:  `[{"Topic":"t","Partition":0,"Replicas":[2,3]},{"Topic":"t","Partition":1,"Replicas":null}]`,
			response: `{"body":[{"topic":"t","partition":0},{"topic":"t","partition":1,"err":{"code":85,"msg":"none"}}]}`,
			want: []metadata.ReassignmentResult{{Topic: "t", Partition: 0},
				{Topic: "t", Partition: 1, Err: &RemoteError{Code: 85, Msg: "none"}}},
		},
		{
			name: "ListPartitionReassignments",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.ListPartitionReassignments(ctx, metadata.ListReassignmentsRequest{Topics: []metadata.ListReassignmentsTopic{{Name: "t", Partitions: []int32{0}}}})
			},
			method:   12,
			request:  `{"Topics":[{"Name":"t","Partitions":[0]}]}`,
			response: `{"body":[{"Topic":"t","Partition":0,"Replicas":[2,3,1],"AddingReplicas":[2],"RemovingReplicas":[1]}]}`,
			want: []metadata.OngoingReassignment{{Topic: "t", Partition: 0, Replicas: []int32{2, 3, 1},
				AddingReplicas: []int32{2}, RemovingReplicas: []int32{1}}},
		},
		{
			name: "CreateACLs",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.CreateACLs(ctx, []authz.ACL{
					{ResourceType: authz.ResTopic, ResourceName: "t", PatternType: authz.PatLiteral, Principal: "User:a", Host: "*", Operation: authz.OpRead, Permission: authz.PermAllow},
					{ResourceType: authz.ResAny}})
			},
			method:   14,
			request:  `[{"ResourceType":2,"ResourceName":"t","PatternType":3,"Principal":"User:a","Host":"*","Operation":3,"Permission":3},{"ResourceType":1,"ResourceName":"","PatternType":0,"Principal":"","Host":"","Operation":0,"Permission":0}]`,
			response: `{"body":[{},{"err":{"code":42,"msg":"invalid resourceType 1"}}]}`,
			want:     []metadata.CreateACLResult{{}, {Err: &RemoteError{Code: 42, Msg: "invalid resourceType 1"}}},
		},
		{
			name: "DeleteACLs",
			call: func(ctx context.Context, cl *Client) (any, error) {
				name := "t"
				return cl.DeleteACLs(ctx, []authz.Filter{
					{ResourceType: authz.ResTopic, ResourceName: &name, PatternType: authz.PatMatch, Operation: authz.OpAny, Permission: authz.PermAny},
					{}})
			},
			method:   15,
			request:  `[{"ResourceType":2,"ResourceName":"t","PatternType":2,"Principal":null,"Host":null,"Operation":1,"Permission":1},{"ResourceType":0,"ResourceName":null,"PatternType":0,"Principal":null,"Host":null,"Operation":0,"Permission":0}]`,
			response: `{"body":[{"deleted":[{"ID":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","ResourceType":2,"ResourceName":"t","PatternType":3,"Principal":"User:a","Host":"*","Operation":3,"Permission":3}]},{"err":{"code":42,"msg":"unknown resource type 0 in filter"}}]}`,
			want: []metadata.DeleteACLsResult{
				{Deleted: []metadata.ACLEntry{{ID: goldenID, ACL: authz.ACL{ResourceType: authz.ResTopic, ResourceName: "t", PatternType: authz.PatLiteral, Principal: "User:a", Host: "*", Operation: authz.OpRead, Permission: authz.PermAllow}}}},
				{Err: &RemoteError{Code: 42, Msg: "unknown resource type 0 in filter"}}},
		},
		{
			name: "AlterUserScramCredentials",
			call: func(ctx context.Context, cl *Client) (any, error) {
				return cl.AlterUserScramCredentials(ctx, AlterScramRequest{
					Deletions:  []metadata.ScramDeletion{{Name: "bob", Mechanism: metadata.ScramSHA512}},
					Upsertions: []metadata.ScramUpsertion{{Name: "alice", Mechanism: metadata.ScramSHA256, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: []byte{1, 2, 3}}}})
			},
			method:   16,
			request:  `{"deletions":[{"Name":"bob","Mechanism":2}],"upsertions":[{"Name":"alice","Mechanism":1,"Iterations":4096,"Salt":"c2FsdA==","SaltedPassword":"AQID"}]}`,
			response: `{"body":[{"user":"bob","err":{"code":91,"msg":"absent"}},{"user":"alice"}]}`,
			want:     []metadata.AlterScramResult{{User: "bob", Err: &RemoteError{Code: 91, Msg: "absent"}}, {User: "alice"}},
		},
		{
			name: "AlterClientQuotas",
			call: func(ctx context.Context, cl *Client) (any, error) {
				user := "alice"
				return cl.AlterClientQuotas(ctx, AlterClientQuotasRequest{Entries: []metadata.QuotaAlteration{
					{Entity: []metadata.QuotaEntityPart{{Type: "user", Name: &user}, {Type: "client-id"}},
						Ops: []metadata.QuotaOp{{Key: "producer_byte_rate", Value: 1024}, {Key: "request_percentage", Remove: true}}},
					{}}, ValidateOnly: true})
			},
			method:   17,
			request:  `{"entries":[{"Entity":[{"Type":"user","Name":"alice"},{"Type":"client-id","Name":null}],"Ops":[{"Key":"producer_byte_rate","Value":1024,"Remove":false},{"Key":"request_percentage","Value":0,"Remove":true}]},{"Entity":null,"Ops":null}],"validate_only":true}`,
			response: `{"body":[{},{"err":{"code":42,"msg":"Invalid empty client quota entity"}}]}`,
			want:     []error{nil, &RemoteError{Code: 42, Msg: "Invalid empty client quota entity"}},
		},
	}
}

// TestRPCClientGoldenEncoding pins, per RPC, the bytes the Client sends
// (method, flags, JSON body) and how it decodes the controller's answer,
// so the wire stays byte-identical for mixed-version clusters.
func TestRPCClientGoldenEncoding(t *testing.T) {
	r := newRPCRecorder(t)
	cl := NewClient(ClientOptions{Addrs: []string{r.ln.Addr().String()}})
	defer cl.Close()
	fwd := NewClient(ClientOptions{Addrs: []string{r.ln.Addr().String()}, forwarding: true})
	defer fwd.Close()
	for _, g := range rpcGoldens() {
		for _, c := range []struct {
			cl    *Client
			flags byte
		}{{cl, 0}, {fwd, flagForwarded}} {
			r.expect(kindResponse, g.response)
			got, err := g.call(ctx(t), c.cl)
			frames := r.recorded()
			want := string(append([]byte{kindRequest, g.method, c.flags}, g.request...))
			if len(frames) != 1 || string(frames[0]) != want {
				t.Errorf("%s (flags %d): sent %q, want %q", g.name, c.flags, frames, want)
			}
			if g.wantErr != nil {
				if !reflect.DeepEqual(err, g.wantErr) {
					t.Errorf("%s: err %#v, want %#v", g.name, err, g.wantErr)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", g.name, err)
				continue
			}
			if !reflect.DeepEqual(got, g.want) {
				t.Errorf("%s: got %#v, want %#v", g.name, got, g.want)
			}
		}
	}
	// NOT_CONTROLLER carries the leader hint; a forwarding client returns it
	// rather than following it.
	r.expect(kindResponse, `{"err":{"code":41,"msg":"not me","leader_id":2,"leader_addr":"127.0.0.1:1"}}`)
	_, err := fwd.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: 1})
	var nc *NotControllerError
	if !errors.As(err, &nc) || nc.LeaderID != 2 || nc.LeaderAddr != "127.0.0.1:1" {
		t.Fatalf("NOT_CONTROLLER: %v", err)
	}
}

// TestRPCWatchGoldenEncoding pins the watch request and the delta frames.
func TestRPCWatchGoldenEncoding(t *testing.T) {
	r := newRPCRecorder(t)
	cl := NewClient(ClientOptions{Addrs: []string{r.ln.Addr().String()}})
	defer cl.Close()
	// One TopicRecord as metadata.Encode writes it, base64 in JSON.
	r.expect(kindDelta, `{"offset":5,"records":["BAABdGunuBCdrRHRgLQAwE/UMMg="]}`)
	w, err := cl.Watch(ctx(t), 5)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	d, err := w.Next(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if frames := r.recorded(); len(frames) != 1 || string(frames[0]) != "\x03\x09\x00"+`{"from":5,"keepalive_ms":500}` {
		t.Fatalf("watch sent %q", frames)
	}
	if d.Offset != 5 || len(d.Records) != 1 || !reflect.DeepEqual(d.Records[0], &metadata.TopicRecord{Name: "t", TopicID: goldenID}) {
		t.Fatalf("delta %+v", d)
	}
}

// TestRPCServerGoldenAnswers pins the server's side: the exact response
// payload to a request the controller answers deterministically, and to a
// method it does not know.
func TestRPCServerGoldenAnswers(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	registerBrokers(t, ctl, 1, 0)
	res, err := ctl.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "t", NumPartitions: 2, ReplicationFactor: 1, TopicID: goldenID}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("create: %v %v", err, res)
	}
	conn, err := net.Dial("tcp", ctl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testWait))
	br, bw := bufio.NewReader(conn), bufio.NewWriter(conn)
	for _, c := range []struct {
		method, flags byte
		body, want    string
	}{
		{4, 0, `{"names":["nope"],"ids":["00000000-0000-0000-0000-000000000000"]}`,
			`{"body":[{"name":"nope","topic_id":"00000000-0000-0000-0000-000000000000","err":{"code":3,"msg":"UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.: topic \"nope\""}},{"name":"","topic_id":"00000000-0000-0000-0000-000000000000","err":{"code":42,"msg":"INVALID_REQUEST: This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.: nil topic id"}}]}`},
		{4, flagForwarded, `{"names":[]}`, `{"body":[]}`},
		{16, 0, `{"deletions":[{"Name":"nobody","Mechanism":1}],"upsertions":[{"Name":"alice","Mechanism":1,"Iterations":100,"Salt":"c2FsdA==","SaltedPassword":"AQID"}]}`,
			`{"body":[{"user":"nobody","err":{"code":91,"msg":"RESOURCE_NOT_FOUND: A request illegally referred to a resource that does not exist.: Attempt to delete a user credential that does not exist"}},{"user":"alice","err":{"code":93,"msg":"UNACCEPTABLE_CREDENTIAL: Requested credential would not meet criteria for acceptability.: Too few iterations"}}]}`},
		{14, 0, `[{"ResourceType":1,"ResourceName":"t","PatternType":3,"Principal":"User:a","Host":"*","Operation":3,"Permission":3}]`,
			`{"body":[{"err":{"code":42,"msg":"INVALID_REQUEST: This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.: invalid resourceType 1"}}]}`},
		{17, 0, `{"entries":[{"Entity":null,"Ops":null}]}`,
			`{"body":[{"err":{"code":42,"msg":"INVALID_REQUEST: This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.: Invalid empty client quota entity"}}]}`},
		{200, 0, `{}`, `{"err":{"code":-1,"msg":"controller: protocol error: unknown method 200"}}`},
		{1, 0, `{`, `{"err":{"code":-1,"msg":"controller: protocol error: unexpected end of JSON input"}}`},
		{2, 0, `{"BrokerID":999,"BrokerEpoch":1}`,
			`{"err":{"code":102,"msg":"BROKER_ID_NOT_REGISTERED: The given broker ID was not registered.: broker 999"}}`},
		{3, 0, `{"Topics":[{"Name":"","NumPartitions":1,"ReplicationFactor":1}],"ValidateOnly":true}`,
			`{"body":[{"name":"","topic_id":"00000000-0000-0000-0000-000000000000","err":{"code":17,"msg":"INVALID_TOPIC_EXCEPTION: The request attempted to perform an operation on an invalid topic.: illegal topic name \"\""},"num_partitions":0,"replication_factor":0}]}`},
		{5, 0, `{"Topics":[{"Name":"nope","Count":2}]}`,
			`{"body":[{"name":"nope","err":{"code":3,"msg":"UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.: topic \"nope\""}}]}`},
		{6, 0, `{"Resources":[{"Type":2,"Name":"nope","Configs":[{"Name":"retention.ms","Value":"1"}]}]}`,
			`{"body":[{"type":2,"name":"nope","err":{"code":3,"msg":"UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition.: topic \"nope\""}}]}`},
		{7, 0, `{"BrokerID":999,"BrokerEpoch":1,"TopicID":"6ba7b810-9dad-11d1-80b4-00c04fd430c8"}`,
			`{"body":{"err":{"code":77,"msg":"STALE_BROKER_EPOCH: Broker epoch has changed: broker 999 epoch 1"},"leader":-1,"leader_epoch":0,"partition_epoch":0,"isr":null}}`},
		{8, 0, `{"SegmentID":"f47ac10b-58cc-4372-a567-0e02b2c3d479","TopicID":"00000000-0000-0000-0000-0000000000ff","State":0}`,
			`{"err":{"code":100,"msg":"UNKNOWN_TOPIC_ID: This server does not host this topic ID.: 00000000-0000-0000-0000-0000000000ff"}}`},
		{8, 0, `{"SegmentID":"f47ac10b-58cc-4372-a567-0e02b2c3d479","TopicID":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","Partition":1,"BaseOffset":0,"EndOffset":9,"SizeBytes":10,"State":0,"BrokerID":101}`,

			`{"body":{}}`},
		{5, 0, `{"Topics":[{"Name":"t","Count":1}]}`,
			`{"body":[{"name":"t","err":{"code":37,"msg":"INVALID_PARTITIONS: Number of partitions is below 1.: topic \"t\" has 2 partitions, asked for 1"}}]}`},
		{6, 0, `{"Resources":[{"Type":2,"Name":"t","Configs":[{"Name":"retention.ms","Value":"1000"}]}],"Incremental":true}`,
			`{"body":[{"type":2,"name":"t"}]}`},
	} {
		if err := writeFrame(bw, kindRequest, []byte{c.method, c.flags}, []byte(c.body)); err != nil {
			t.Fatal(err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		kind, payload, err := readFrame(br)
		if err != nil {
			t.Fatal(err)
		}
		if kind != kindResponse || string(payload) != c.want {
			t.Errorf("method %d %s: answered kind %d\n%s\nwant\n%s", c.method, c.body, kind, payload, c.want)
		}
	}
}
