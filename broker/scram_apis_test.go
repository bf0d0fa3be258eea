package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/broker/sasl"
	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
)

// scramLogin runs franz-go's SCRAM client in-process against the node's
// SCRAM mechanism (what a SASL listener's SaslAuthenticate rounds carry)
// and reports whether it authenticated as user.
func scramLogin(t *testing.T, n *Node, mech, user, pass string) bool {
	t.Helper()
	m, err := newScramMechanism(n, mech)
	if err != nil {
		t.Fatal(err)
	}
	auth := kscram.Auth{User: user, Pass: pass}
	cm := auth.AsSha256Mechanism()
	if mech == sasl.ScramSHA512 {
		cm = auth.AsSha512Mechanism()
	}
	cs, msg, err := cm.Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	ss := m.Start()
	for i := 0; i < 2; i++ {
		out, done, err := ss.Step(msg)
		if err != nil {
			return false
		}
		if _, msg, err = cs.Challenge(out); err != nil {
			t.Fatalf("client refused the server's message: %v", err)
		}
		if done {
			return ss.Principal() == user
		}
	}
	return false
}

// TestScramAPIsRoundTrip: AlterUserScramCredentials then, at once,
// DescribeUserScramCredentials (kafka-go's pattern) through kadm; the
// credential authenticates franz-go's SCRAM client against the answering
// broker as soon as the alter answered; Kafka's per-user errors.
func TestScramAPIsRoundTrip(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	// Hold every delta carrying a credential change back a while: an
	// answer that did not wait for this broker's image would arrive before
	// the credential can be used here.
	hold := func(d controller.Delta) {
		for _, r := range d.Records {
			switch r.(type) {
			case *metadata.UserScramCredentialRecord, *metadata.RemoveUserScramCredentialRecord:
				time.Sleep(300 * time.Millisecond)
				return
			}
		}
	}
	n.deltaHook.Store(&hold)

	if scramLogin(t, n, sasl.ScramSHA512, "alice", "alice-secret") {
		t.Fatal("alice authenticates before she has a credential")
	}
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 15000, Password: "alice-secret"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
	})
	if err != nil || len(altered) != 2 || altered["alice"].Err != nil || altered["bob"].Err != nil {
		t.Fatalf("AlterUserSCRAMs: %v %+v", err, altered)
	}
	if !scramLogin(t, n, sasl.ScramSHA512, "alice", "alice-secret") || !scramLogin(t, n, sasl.ScramSHA256, "bob", "bob-secret") {
		t.Fatal("the altered credentials do not authenticate on the broker that answered")
	}
	if scramLogin(t, n, sasl.ScramSHA512, "alice", "wrong") || scramLogin(t, n, sasl.ScramSHA256, "alice", "alice-secret") {
		t.Fatal("a wrong password or mechanism authenticates")
	}
	desc, err := adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil || desc["alice"].Err != nil || len(desc["alice"].CredInfos) != 1 ||
		desc["alice"].CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 15000}) {
		t.Fatalf("DescribeUserSCRAMs(alice): %v %+v", err, desc)
	}
	all, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil || len(all) != 2 || all["bob"].CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha256, Iterations: 4096}) {
		t.Fatalf("DescribeUserSCRAMs(all): %v %+v", err, all)
	}

	// Kafka's per-user errors, through the raw request (kadm validates
	// some of them away on the client).
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(name string, mech int8, iters int32, salted []byte) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iters, []byte("salt"), salted
		req.Upsertions = append(req.Upsertions, u)
	}
	del := func(name string, mech int8) {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		req.Deletions = append(req.Deletions, d)
	}
	del("nobody", 1)
	del("dup", 1)
	up("dup", 2, 4096, make([]byte, 64))
	up("few", 1, 1000, make([]byte, 32))
	up("sha1", 3, 4096, make([]byte, 32))
	up("", 1, 4096, make([]byte, 32))
	resp, err := req.RequestWith(ctx, newClient(t, n))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{"nobody": kerr.ResourceNotFound.Code, "dup": kerr.DuplicateResource.Code,
		"few": kerr.UnacceptableCredential.Code, "sha1": kerr.UnsupportedSaslMechanism.Code, "": kerr.UnacceptableCredential.Code}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != want[r.User] {
			t.Errorf("user %q: code %d, want %d", r.User, r.ErrorCode, want[r.User])
		}
	}

	// Describe: a user twice, one without credentials.
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"alice", "nobody", "alice"} {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		dreq.Users = append(dreq.Users, ru)
	}
	dresp, err := dreq.RequestWith(ctx, newClient(t, n))
	if err != nil || dresp.ErrorCode != 0 || len(dresp.Results) != 2 ||
		dresp.Results[0].ErrorCode != kerr.DuplicateResource.Code || dresp.Results[1].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("describe alice, nobody, alice: %v %+v", err, dresp)
	}

	// Delete, then kafka-go's expectation: a per-user RESOURCE_NOT_FOUND,
	// no top-level error; and the credential no longer authenticates.
	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || altered["alice"].Err != nil {
		t.Fatalf("delete alice: %v %+v", err, altered)
	}
	if scramLogin(t, n, sasl.ScramSHA512, "alice", "alice-secret") {
		t.Fatal("a deleted credential authenticates after the delete answered")
	}
	desc, err = adm.DescribeUserSCRAMs(ctx, "alice")
	if err != nil || !errors.Is(desc["alice"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe after delete: %v %+v", err, desc)
	}
}

// TestScramAPIsAuthorization: with the authorizer on, a principal without
// ALTER / DESCRIBE on the cluster is refused with
// CLUSTER_AUTHORIZATION_FAILED (per user for the alter, top-level for the
// describe) and nothing changes; a super user passes.
func TestScramAPIsAuthorization(t *testing.T) {
	n := startNode(t, t.TempDir(), authzOn(nil))
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	// kadm turns a per-user authorization failure into its error.
	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Password: "x"}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter without ALTER: %v", err)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, name := range []string{"alice", "bob", "alice"} {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, 1
		req.Deletions = append(req.Deletions, d)
	}
	resp, err := req.RequestWith(ctx, newClient(t, n))
	if err != nil || len(resp.Results) != 2 || resp.Results[0].User != "alice" || resp.Results[1].User != "bob" ||
		resp.Results[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code || resp.Results[1].ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("raw alter without ALTER: %v %+v", err, resp)
	}
	if _, err := adm.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("describe without DESCRIBE: %v", err)
	}
	if scramLogin(t, n, sasl.ScramSHA256, "alice", "x") {
		t.Fatal("a refused alter created a credential")
	}

	su := startNode(t, t.TempDir(), authzOn(map[string]string{"super.users": "User:ANONYMOUS"}))
	sadm := newAdmin(t, su)
	if altered, err := sadm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Password: "x"}}); err != nil || altered["alice"].Err != nil {
		t.Fatalf("super user's alter: %v %+v", err, altered)
	}
	if desc, err := sadm.DescribeUserSCRAMs(ctx); err != nil || len(desc) != 1 {
		t.Fatalf("super user's describe: %v %+v", err, desc)
	}
}

// TestScramAPIsOnACluster: an AlterUserScramCredentials answered by a
// broker-only node (its controller RPC goes over the network, method 16)
// authenticates on that broker at once and on every other broker soon
// after; DescribeUserScramCredentials through a third broker sees it.
func TestScramAPIsOnACluster(t *testing.T) {
	c := startCluster(t, 3, nil)
	ctx := testCtx(t)
	adm2 := newAdmin(t, c.node(2))
	if res, err := adm2.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha512, Password: "carol-secret", Iterations: 4096}}); err != nil || res["carol"].Err != nil {
		t.Fatalf("alter through broker 2: %v %+v", err, res)
	}
	if !scramLogin(t, c.node(2), sasl.ScramSHA512, "carol", "carol-secret") {
		t.Fatal("the credential does not authenticate on the broker that answered")
	}
	for _, id := range []int32{1, 3} {
		eventually(t, "carol authenticates on another broker", func() bool {
			return scramLogin(t, c.node(id), sasl.ScramSHA512, "carol", "carol-secret")
		})
	}
	desc, err := newAdmin(t, c.node(3)).DescribeUserSCRAMs(ctx, "carol")
	if err != nil || desc["carol"].Err != nil || len(desc["carol"].CredInfos) != 1 {
		t.Fatalf("describe through broker 3: %v %+v", err, desc)
	}
}
