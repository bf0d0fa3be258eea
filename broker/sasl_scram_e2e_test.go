package broker

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
)

// TestSASLScramOverTheWire: franz-go's SCRAM-SHA-256 and SCRAM-SHA-512
// clients over SASL_PLAINTEXT and SASL_SSL, with credentials created
// through AlterUserScramCredentials on the PLAINTEXT listener and used at
// once; a wrong password and an unknown user fail alike with
// SASL_AUTHENTICATION_FAILED; the authenticated principal is the one the
// authorizer sees (admin, a super user, creates a topic; alice cannot).
func TestSASLScramOverTheWire(t *testing.T) {
	ca := newTestCA(t, "scram CA")
	k, c := ca.issue(t, pkix.Name{CommonName: "broker"})
	props := map[string]string{
		"listeners":                   "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"inter.broker.listener.name":  "PLAINTEXT",
		"sasl.enabled.mechanisms":     "SCRAM-SHA-256,SCRAM-SHA-512",
		"ssl.keystore.type":           "PEM",
		"ssl.keystore.location":       writeKeystore(t, filepath.Join(t.TempDir(), "broker.pem"), k, c),
		"ssl.truststore.type":         "PEM",
		"ssl.truststore.certificates": string(ca.pem),
		"authorizer.class.name":       "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                 "User:ANONYMOUS;User:admin",
	}
	n := startNode(t, t.TempDir(), props)

	ctx := testCtx(t)
	adm := newAdmin(t, n) // PLAINTEXT: User:ANONYMOUS, a super user
	for _, u := range []kadm.UpsertSCRAM{
		{User: "admin", Mechanism: kadm.ScramSha256, Password: "admin-secret-256", Iterations: 8192},
		{User: "alice", Mechanism: kadm.ScramSha512, Password: "alice-secret-512", Iterations: 4096},
	} {
		if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{u}); err != nil || res[u.User].Err != nil {
			t.Fatalf("create %s: %v %+v", u.User, err, res)
		}
	}

	client := func(listener string, mech string, user, pass string) *kgo.Client {
		auth := kscram.Auth{User: user, Pass: pass}
		m := auth.AsSha256Mechanism()
		if mech == "SCRAM-SHA-512" {
			m = auth.AsSha512Mechanism()
		}
		opts := []kgo.Opt{kgo.SeedBrokers(n.Addrs()[listener]), kgo.SASL(m), kgo.RetryTimeout(5 * time.Second)}
		if listener == "SASL_SSL" {
			opts = append(opts, kgo.DialTLSConfig(clientTLS(t, ca, nil, nil)))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	create := func(cl *kgo.Client, topic string) error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := kadm.NewClient(cl).CreateTopic(cctx, 1, 1, nil, topic)
		if err != nil {
			return err
		}
		return res.Err
	}
	for _, l := range []string{"SASL_PLAINTEXT", "SASL_SSL"} {
		// admin (SCRAM-SHA-256) is a super user: it may create topics.
		if err := create(client(l, "SCRAM-SHA-256", "admin", "admin-secret-256"), "by-admin-"+strings.ToLower(l)); err != nil {
			t.Fatalf("%s: admin over SCRAM-SHA-256: %v", l, err)
		}
		// alice (SCRAM-SHA-512) authenticates, but has no ACL.
		err := create(client(l, "SCRAM-SHA-512", "alice", "alice-secret-512"), "by-alice")
		if !errors.Is(err, kerr.TopicAuthorizationFailed) && !errors.Is(err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("%s: alice's create: %v, want an authorization failure (her principal reached the authorizer)", l, err)
		}
		// A wrong password, a wrong mechanism and an unknown user fail
		// with the same error.
		var msgs []string
		for _, c := range []struct{ mech, user, pass string }{
			{"SCRAM-SHA-256", "admin", "wrong"},
			{"SCRAM-SHA-512", "admin", "admin-secret-256"},
			{"SCRAM-SHA-256", "mallory", "x"},
		} {
			err := create(client(l, c.mech, c.user, c.pass), "never")
			if !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("%s %s %s: %v, want SASL_AUTHENTICATION_FAILED", l, c.mech, c.user, err)
			}
			msgs = append(msgs, strings.ReplaceAll(err.Error(), c.mech, "MECH"))
		}
		if msgs[0] != msgs[2] {
			t.Fatalf("%s: a wrong password and an unknown user fail differently: %q vs %q", l, msgs[0], msgs[2])
		}
	}
}

// TestSASLInterBrokerScramBootstrapped: the brokers of a 3-node cluster
// replicate over a SASL_PLAINTEXT inter-broker listener with
// SCRAM-SHA-512, authenticating as User:broker, a user that exists only
// through the format-time bootstrap of the controller node (no API call
// could have created it first: with the authorizer on, only super users
// may, and the brokers' own principal is that user).
func TestSASLInterBrokerScramBootstrapped(t *testing.T) {
	boot := t.TempDir()
	r, err := ParseAddScram(`SCRAM-SHA-512=[name=broker,password=broker-secret,iterations=4096]`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FormatBootstrap(nil, Config{LogDir: boot, MetadataLogDir: boot}, []metadata.Record{r}); err != nil {
		t.Fatal(err)
	}
	extra := map[string]string{
		"listener.security.protocol.map":                        "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":                            "INTERNAL",
		"sasl.mechanism.inter.broker.protocol":                  "SCRAM-SHA-512",
		"listener.name.internal.sasl.enabled.mechanisms":        "SCRAM-SHA-512",
		"listener.name.internal.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"authorizer.class.name":                                 "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                           "User:broker;User:ANONYMOUS",
	}
	own := map[int32]map[string]string{1: {"listeners": "PLAINTEXT://127.0.0.2:0,INTERNAL://127.0.0.2:0,CONTROLLER://127.0.0.2:0", "metadata.log.dir": boot}}
	for id := int32(2); id <= 3; id++ {
		own[id] = map[string]string{"listeners": fmt.Sprintf("PLAINTEXT://127.0.0.%d:0,INTERNAL://127.0.0.%d:0", id+1, id+1)}
	}
	cl3 := startClusterWith(t, 3, extra, own)
	cl := cl3.client()
	createReplicatedTopic(t, cl, "scramrepl", 2, 3, nil)
	produceN(t, cl, "scramrepl", 0, 100)
	for p := int32(0); p < 2; p++ {
		if b := cl3.waitReplicasIdentical("scramrepl", p); len(b) == 0 {
			t.Fatalf("partition %d: empty", p)
		}
	}
	testutil.Eventually(t, testWait, func() bool {
		for id := int32(1); id <= 3; id++ {
			if strings.Contains(connPrincipals(cl3.node(id), "INTERNAL"), "User:broker") {
				return true
			}
		}
		return false
	}, "a connection on INTERNAL as User:broker")
}

// TestSASLScramReauth (KIP-368 with SCRAM): with connections.max.reauth.ms
// franz-go re-authenticates its SCRAM connections by itself and keeps
// producing past two lifetimes; once the user's credential is deleted, the
// next re-authentication fails and the client cannot produce any more.
func TestSASLScramReauth(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{
		"listeners":                  "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"inter.broker.listener.name": "PLAINTEXT",
		"sasl.enabled.mechanisms":    "SCRAM-SHA-256",
		"connections.max.reauth.ms":  "1000",
	})
	ctx := testCtx(t)
	adm := newAdmin(t, n)
	if res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Password: "alice-secret"}}); err != nil || res["alice"].Err != nil {
		t.Fatalf("create alice: %v %+v", err, res)
	}
	createTopic(t, adm, "scram-reauth", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addrs()["SASL_PLAINTEXT"]), kgo.DefaultProduceTopic("scram-reauth"),
		kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	produce := func() error {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return cl.ProduceSync(pctx, kgo.StringRecord("r")).FirstErr()
	}
	start := time.Now()
	for time.Since(start) < 2500*time.Millisecond {
		if err := produce(); err != nil {
			t.Fatalf("produce after %v: %v", time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond) // pacing the producer
	}
	opened := counterValue(t, n.metrics.connOpened.WithLabelValues("SASL_PLAINTEXT"))
	auths := counterValue(t, n.metrics.saslSuccess.WithLabelValues("SASL_PLAINTEXT", "SCRAM-SHA-256"))
	if auths < opened+2 {
		t.Fatalf("%v SCRAM authentications on %v connections: no re-authentication", auths, opened)
	}

	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil); err != nil || res["alice"].Err != nil {
		t.Fatalf("delete alice: %v %+v", err, res)
	}
	testutil.Eventually(t, testWait, func() bool {
		return errors.Is(produce(), kerr.SaslAuthenticationFailed)
	}, "produce fails with SASL_AUTHENTICATION_FAILED once alice's credential is gone")
}
