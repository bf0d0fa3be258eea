package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
)

// TestProcControllerListenerSASL: three `strata serve` nodes whose
// CONTROLLER listener is SASL_PLAINTEXT, with PLAIN (the nodes' own
// credentials and users in its jaas config) or OAUTHBEARER (Kafka's
// unsecured tokens), super.users naming the nodes' principal, form their
// quorum, register as brokers and create a topic replicated on all three;
// quorum clients with a wrong credential, a principal that is not a node,
// or no SASL are refused (counted in
// strata_controller_sasl_authentication_failures_total, logged without
// secrets) and create nothing.
func TestProcControllerListenerSASL(t *testing.T) {
	token := func(sub string, exp time.Duration) func() (string, error) {
		return func() (string, error) {
			enc := base64.RawURLEncoding.EncodeToString
			claims := fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, sub, time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(exp).Unix())
			return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + ".", nil
		}
	}
	pki := newTestPKI(t)
	tlsDial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: pki.clientConfig("")}
		return d.DialContext(ctx, network, addr)
	}
	plainSettings := []string{
		"listener.name.controller.sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.controller.protocol=PLAIN",
		`listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="ctl" password="ctl-secret" user_ctl="ctl-secret" user_op="op-secret";`,
	}
	for _, mc := range []struct {
		mech     string
		settings []string
		refused  []saslRefusal
		// wrong, if set, replaces the jaas config for a broker-only node
		// that must exit refused.
		wrong string
	}{
		{"PLAIN", append([]string{"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT"}, plainSettings...), []saslRefusal{
			{"wrong-password", controller.SASLDialer(nil, nil, controller.PlainSASLClient("ctl", "wrong-pw-77")), false},
			{"not-a-node", controller.SASLDialer(nil, nil, controller.PlainSASLClient("op", "op-secret")), false},
			{"no-sasl", nil, true},
		}, `listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="ctl" password="wrong-pw-77" user_ctl="ctl-secret";`},
		{"OAUTHBEARER", []string{"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
			"listener.name.controller.sasl.enabled.mechanisms=OAUTHBEARER", "sasl.mechanism.controller.protocol=OAUTHBEARER",
			`listener.name.controller.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="ctl";`,
		}, []saslRefusal{
			{"expired-token", controller.SASLDialer(nil, nil, controller.OAuthBearerSASLClient(token("ctl", -time.Hour))), false},
			{"not-a-node", controller.SASLDialer(nil, nil, controller.OAuthBearerSASLClient(token("op", time.Hour))), false},
			{"plain-instead", controller.SASLDialer(nil, nil, controller.PlainSASLClient("ctl", "ctl-secret")), false},
			{"no-sasl", nil, true},
		}, ""},
		{"SASL_SSL-PLAIN", append([]string{"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
			"listener.name.controller.ssl.keystore.type=PEM", "listener.name.controller.ssl.keystore.location=" + pki.keystore("node"),
			"listener.name.controller.ssl.truststore.type=PEM", "listener.name.controller.ssl.truststore.location=" + pki.caPath},
			plainSettings...), []saslRefusal{
			{"wrong-password", controller.SASLDialer(tlsDial, nil, controller.PlainSASLClient("ctl", "wrong-pw-77")), false},
			{"not-a-node", controller.SASLDialer(tlsDial, nil, controller.PlainSASLClient("op", "op-secret")), false},
			{"no-sasl", tlsDial, true},
		}, ""},
	} {
		t.Run(mc.mech, func(t *testing.T) {
			procControllerSASL(t, append([]string{"super.users=User:ctl"}, mc.settings...), mc.refused, mc.wrong)
		})
	}
}

// saslRefusal is a quorum client the CONTROLLER listener must refuse.
type saslRefusal struct {
	name string
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// noSASL: dial does not authenticate (nil: plain TCP).
	noSASL bool
}

func procControllerSASL(t *testing.T, settings []string, refusals []saslRefusal, wrong string) {
	c := startProcCluster(t, 3, settings...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.procs[0].addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	var brokers []int32
	for ctx.Err() == nil {
		m, err := adm.Metadata(ctx)
		if err == nil && len(m.Brokers) == 3 {
			brokers = m.Brokers.NodeIDs()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(brokers) != 3 {
		t.Fatalf("brokers %v, want three registered over SASL", brokers)
	}
	res, err := adm.CreateTopic(ctx, 1, 3, nil, "over-sasl")
	if err != nil || res.Err != nil {
		t.Fatalf("CreateTopic: %v %v", err, res.Err)
	}

	ctlAddr := c.procs[0].listenerAddr(t, "CONTROLLER")
	admin := c.procs[0].listenerAddr(t, "ADMIN")
	for _, tc := range refusals {
		before := metricSum(t, admin, "strata_controller_sasl_authentication_failures_total")
		if !tc.noSASL {
			if conn, err := tc.dial(ctx, "tcp", ctlAddr); !errors.Is(err, controller.ErrSASLFailed) {
				if conn != nil {
					conn.Close()
				}
				t.Fatalf("%s: dial %v, want ErrSASLFailed", tc.name, err)
			}
		}
		qc := controller.NewClient(controller.ClientOptions{Addrs: []string{ctlAddr}, Dial: tc.dial})
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		_, err := qc.CreateTopics(cctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: tc.name, NumPartitions: 1, ReplicationFactor: 1}}})
		ccancel()
		qc.Close()
		if err == nil {
			t.Fatalf("%s: CreateTopics on the CONTROLLER listener succeeded", tc.name)
		}
		if got := metricSum(t, admin, "strata_controller_sasl_authentication_failures_total"); got <= before {
			t.Fatalf("%s: strata_controller_sasl_authentication_failures_total %v, was %v", tc.name, got, before)
		}
	}
	// A broker-only node with a wrong password exits, saying why.
	var wrongNode *proc
	if wrong != "" {
		ws := append([]string{"node.id=4", "process.roles=broker", "listeners=PLAINTEXT://127.0.0.1:0",
			"controller.quorum.voters=" + c.voters, "admin.listener=", "log.dirs=" + t.TempDir()}, settings...)
		wrongNode = launchProc(t, 4, append(ws, wrong)...)
		select {
		case <-wrongNode.done:
		case <-time.After(procWait):
			t.Fatalf("the node with a wrong password still runs after %v", procWait)
		}
		if wrongNode.cmd.ProcessState.Success() {
			t.Fatal("the node with a wrong password exited 0")
		}
		if errOut, _ := os.ReadFile(wrongNode.err); !bytes.Contains(errOut, []byte("refused this node's SASL credentials")) {
			t.Fatalf("the node with a wrong password did not say why:\n%s", errOut)
		}
	}
	// Nothing changed: every node sees the one topic, on all three.
	for _, p := range c.procs {
		pc, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
		if err != nil {
			t.Fatal(err)
		}
		m, err := kadm.NewClient(pc).Metadata(ctx)
		pc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ids := m.Brokers.NodeIDs(); len(ids) != 3 {
			t.Fatalf("node at %s: brokers %v, want the three nodes", p.addr, ids)
		}
		if names := m.Topics.Names(); len(names) != 1 || names[0] != "over-sasl" {
			t.Fatalf("node at %s: topics %v, want [over-sasl]", p.addr, names)
		}
		if reps := m.Topics["over-sasl"].Partitions[0].Replicas; len(reps) != 3 {
			t.Fatalf("replicas %v, want 3", reps)
		}
	}
	// The refusals are logged, the passwords never.
	var logs []byte
	for _, p := range append(c.procs, wrongNode) {
		if p == nil {
			continue
		}
		for _, f := range []string{p.out, p.err} {
			b, _ := os.ReadFile(f)
			logs = append(logs, b...)
		}
	}
	if !bytes.Contains(logs, []byte("controller: refused a connection: SASL")) {
		t.Fatal("no refusal logged")
	}
	for _, secret := range []string{"ctl-secret", "op-secret", "wrong-pw-77"} {
		if bytes.Contains(logs, []byte(secret)) {
			t.Fatalf("a node logged the password %q", secret)
		}
	}
}
