package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/internal/testutil"
)

// grantDirect adds ACLs through the controller, as an operator's
// bootstrap would, and waits until the node enforces them.
func grantDirect(t *testing.T, n *Node, acls ...string) {
	t.Helper()
	var as []authz.ACL
	for _, s := range acls {
		a, err := authz.ParseACL(s)
		if err != nil {
			t.Fatal(err)
		}
		as = append(as, a)
	}
	res, err := n.svc.CreateACLs(testCtx(t), as)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	deadline := time.Now().Add(testWait)
	for _, a := range as {
		for !n.authorizer().Authorize(a.Principal, "127.0.0.1", a.Operation, a.ResourceType, a.ResourceName) {
			if time.Now().After(deadline) {
				t.Fatalf("ACL %s not enforced", a)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// grant adds ACLs through the Kafka API (CreateAcls) with kadm.
func grant(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(testCtx(t), b.ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("CreateACLs %s %s: %v", r.Name, r.Operation, r.Err)
		}
	}
}

// TestAuthorizerEndToEnd: with the StandardAuthorizer on and
// allow.everyone.if.no.acl.found=false, an anonymous client (allowed only
// to administer: ALTER and CREATE on the cluster) does not see a topic it
// may not DESCRIBE, cannot produce without WRITE, cannot consume without
// READ; after CreateAcls it can, at once.
func TestAuthorizerEndToEnd(t *testing.T) {
	n := startNode(t, t.TempDir(), authzOn(nil))
	grantDirect(t, n,
		"CLUSTER:LITERAL:kafka-cluster ALLOW User:ANONYMOUS@* ALTER",
		"CLUSTER:LITERAL:kafka-cluster ALLOW User:ANONYMOUS@* CREATE")
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	const topic = "secret"
	createTopic(t, adm, topic, 1, nil)

	// Each look a new client: kgo caches metadata, errors included.
	list := func(topics ...string) (kadm.TopicDetails, error) { return newAdmin(t, n).ListTopics(ctx, topics...) }
	// No DESCRIBE: hidden from a listing, refused by name.
	listed, err := list()
	if err != nil {
		t.Fatal(err)
	}
	if listed.Has(topic) {
		t.Fatal("a topic without DESCRIBE is listed")
	}
	if _, err := list(topic); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("Metadata of %s: %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
	}

	produce := func() error {
		cl := newClient(t, n, kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
		pctx, cancel := context.WithTimeout(ctx, testWait)
		defer cancel()
		return cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	// DESCRIBE (implied by nothing else yet): produce still refused.
	grant(t, adm, kadm.NewACLs().Allow("User:ANONYMOUS").Topics(topic).Operations(kadm.OpDescribe))
	if listed, err := list(); err != nil || !listed.Has(topic) {
		t.Fatalf("after DESCRIBE the topic is not listed: %v", err)
	}
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without WRITE: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	grant(t, adm, kadm.NewACLs().Allow("User:ANONYMOUS").Topics(topic).Operations(kadm.OpWrite))
	if err := produce(); err != nil {
		t.Fatalf("produce with WRITE: %v", err)
	}

	consume := func() (int, error) {
		cl := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		cctx, cancel := context.WithTimeout(ctx, testWait)
		defer cancel()
		for {
			fs := cl.PollFetches(cctx)
			for _, e := range fs.Errors() {
				return 0, e.Err
			}
			if n := fs.NumRecords(); n > 0 {
				return n, nil
			}
		}
	}
	if _, err := consume(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("consume without READ: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	grant(t, adm, kadm.NewACLs().Allow("User:ANONYMOUS").Topics(topic).Operations(kadm.OpRead))
	if got, err := consume(); err != nil || got != 1 {
		t.Fatalf("consume with READ: %d records, %v", got, err)
	}

	// KIP-679: an idempotent producer (InitProducerId without a
	// transactional id) needs no IDEMPOTENT_WRITE once it may WRITE a topic.
	idem := newClient(t, n)
	if err := idem.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("idempotent")}).FirstErr(); err != nil {
		t.Fatalf("idempotent produce with WRITE on the topic: %v", err)
	}

	// A group consumer needs READ on its group too.
	groupConsume := func() error {
		cl := newClient(t, n, kgo.ConsumeTopics(topic), kgo.ConsumerGroup("readers"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		// Closed at once: a refused member left in the group could be
		// assigned the partition the next one waits for (seen in CI).
		defer cl.Close()
		cctx, cancel := context.WithTimeout(ctx, testWait)
		defer cancel()
		for {
			fs := cl.PollFetches(cctx)
			for _, e := range fs.Errors() {
				return e.Err
			}
			if fs.NumRecords() > 0 {
				return nil
			}
		}
	}
	if err := groupConsume(); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("group consume without READ on the group: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	grant(t, adm, kadm.NewACLs().Allow("User:ANONYMOUS").Groups("readers").Operations(kadm.OpRead))
	if err := groupConsume(); err != nil {
		t.Fatalf("group consume with READ on the group: %v", err)
	}

	// DENY wins: a deny of DESCRIBE hides the topic again.
	grant(t, adm, kadm.NewACLs().Deny("User:ANONYMOUS").DenyHosts("*").Topics(topic).Operations(kadm.OpDescribe))
	listed, err = list()
	if err != nil || slices.Contains(listed.Names(), topic) {
		t.Fatalf("a denied topic is listed: %v", err)
	}
}

// TestAuthorizerCluster: three brokers with the authorizer on, their own
// (PLAINTEXT, so anonymous) principal a super user as Kafka setups do:
// replication of an rf=3 topic works (follower fetches pass the
// CLUSTER_ACTION check), and an ACL created through one broker reaches
// the others' authorizers.
func TestAuthorizerCluster(t *testing.T) {
	c := startCluster(t, 3, authzOn(map[string]string{"super.users": "User:ANONYMOUS"}))
	adm := kadm.NewClient(c.client())
	ctx := testCtx(t)
	if res, err := adm.CreateTopic(ctx, 1, 3, nil, "replicated"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	p := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 20 {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "replicated", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v", i, err)
		}
	}
	if err := testutil.Within(testWait, func() error {
		st, ok := c.partitionState("replicated", 0)
		if !ok || len(st.ISR) != 3 {
			return fmt.Errorf("ISR %v, want all three", st.ISR)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	grant(t, adm, kadm.NewACLs().Allow("User:alice").Topics("replicated").Operations(kadm.OpRead))
	if err := testutil.Within(testWait, func() error {
		for id := int32(1); id <= 3; id++ {
			if !c.node(id).authorizer().Authorize("User:alice", "127.0.0.1", authz.OpRead, authz.ResTopic, "replicated") {
				return fmt.Errorf("broker %d does not enforce the ACL yet", id)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
