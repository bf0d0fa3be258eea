package controller

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"

	"github.com/strata-io/strata/broker/sasl"
	"github.com/strata-io/strata/controller/metadata"
	itestutil "github.com/strata-io/strata/internal/testutil"
)

// saslCluster is three voters whose CONTROLLER listeners take SASL PLAIN
// (users ctl and op; only User:ctl is a node) and dial each other as ctl.
func saslCluster(t *testing.T) *ctrlCluster {
	t.Helper()
	srv := &SASLServer{
		Mechanisms: map[string]sasl.Mechanism{"PLAIN": sasl.NewPlain(map[string]string{"ctl": "ctl-secret", "op": "op-secret"})},
		Nodes:      []string{"User:ctl"},
	}
	return newCtrlCluster(t, clusterOpts{n: 3, tcp: true, clusterID: "cluster-a", sasl: srv,
		dial: SASLDialer(nil, nil, PlainSASLClient("ctl", "ctl-secret"))})
}

// TestSASLControllerListener: the quorum forms over SASL-authenticated
// Raft streams; a client with the nodes' credentials creates a topic
// through a follower (forwarding authenticates too); a wrong password, an
// unknown user, a user that is not a node and a client speaking the
// quorum protocol without SASL are refused, and none changes anything.
func TestSASLControllerListener(t *testing.T) {
	c := saslCluster(t)
	lead := c.leader()
	fol := c.follower()

	good := NewClient(ClientOptions{Addrs: []string{fol.Addr()}, ClusterID: func() string { return "cluster-a" },
		Dial: SASLDialer(nil, nil, PlainSASLClient("ctl", "ctl-secret"))})
	t.Cleanup(func() { good.Close() })
	registerBrokers(t, good, 1, 0)
	res, err := good.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "over-sasl", NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("CreateTopics over SASL through follower %d: %v %v", fol.ID(), err, res)
	}

	for _, tc := range []struct {
		name string
		dial func(ctx context.Context, network, addr string) (net.Conn, error)
		want string // in the dial's error; "" for the non-SASL client
	}{
		{"wrong-password", SASLDialer(nil, nil, PlainSASLClient("ctl", "nope")), "Invalid username or password"},
		{"unknown-user", SASLDialer(nil, nil, PlainSASLClient("eve", "ctl-secret")), "Invalid username or password"},
		{"not-a-node", SASLDialer(nil, nil, PlainSASLClient("op", "op-secret")), "not a node"},
		{"unsupported-mechanism", SASLDialer(nil, nil, SASLClient{Mechanism: "SCRAM-SHA-256", Next: func([]byte) ([]byte, error) { return []byte("n,,n=ctl,r=x"), nil }}), "Unsupported SASL mechanism"},
		{"no-sasl", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := saslFailures(lead)
			if tc.dial != nil {
				conn, err := tc.dial(ctx(t), "tcp", lead.Addr())
				if err == nil {
					conn.Close()
					t.Fatal("dial authenticated")
				}
				if !errors.Is(err, ErrSASLFailed) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("dial: %v, want ErrSASLFailed with %q", err, tc.want)
				}
			}
			cl := NewClient(ClientOptions{Addrs: []string{lead.Addr()}, Dial: tc.dial, DialTimeout: time.Second})
			defer cl.Close()
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := cl.CreateTopics(cctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: tc.name, NumPartitions: 1, ReplicationFactor: 1}}})
			if err == nil {
				t.Fatal("CreateTopics succeeded")
			}
			_, err = cl.RegisterBroker(cctx, metadata.RegisterBrokerRequest{BrokerID: 7, IncarnationID: uuid.New()})
			if err == nil {
				t.Fatal("RegisterBroker succeeded")
			}
			if got := saslFailures(lead); got <= before {
				t.Fatalf("sasl_authentication_failures_total %v, was %v", got, before)
			}
		})
	}
	// A Raft hello with heartbeats of rising terms, without SASL: closed
	// at its first frame, no term moves.
	before := terms(c)
	if !fakePeer(t, lead.Addr(), raftHello{from: uint64(fol.ID()), clusterID: "cluster-a", incarnation: c.incs[int32(fol.ID())]}, uint64(lead.ID()), before[int32(lead.ID())], 100) {
		t.Fatal("a Raft stream without SASL stayed open")
	}
	checkServing(t, c, lead, before, "after-fake-peer")
	for _, ctl := range c.ctrls {
		st := ctl.State()
		for _, name := range []string{"wrong-password", "unknown-user", "not-a-node", "unsupported-mechanism", "no-sasl"} {
			if _, ok := st.TopicByName(name); ok {
				t.Fatalf("controller %d has topic %s from a refused client", ctl.ID(), name)
			}
		}
		if _, ok := st.TopicByName("over-sasl"); !ok && ctl.ID() == lead.ID() {
			t.Fatalf("leader lacks the topic created over SASL")
		}
	}
}

// TestSASLOAuthBearerControllerListener: OAUTHBEARER (Kafka's unsecured
// validator) authenticates a client on the CONTROLLER listener; an
// expired token is refused.
func TestSASLOAuthBearerControllerListener(t *testing.T) {
	u, err := sasl.NewUnsecured(nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := &SASLServer{Mechanisms: map[string]sasl.Mechanism{"OAUTHBEARER": sasl.NewOAuthBearer(u)}, Nodes: []string{"User:ctl"}}
	tok := func(sub string, exp time.Time) func() (string, error) {
		return func() (string, error) { return unsecuredJWT(sub, exp), nil }
	}
	c := newCtrlCluster(t, clusterOpts{n: 1, tcp: true, sasl: srv,
		dial: SASLDialer(nil, nil, OAuthBearerSASLClient(tok("ctl", time.Now().Add(time.Hour))))})
	lead := c.leader()
	cl := NewClient(ClientOptions{Addrs: []string{lead.Addr()}, Dial: SASLDialer(nil, nil, OAuthBearerSASLClient(tok("ctl", time.Now().Add(time.Hour))))})
	t.Cleanup(func() { cl.Close() })
	registerBrokers(t, cl, 1, 0)
	res, err := cl.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "oauth", NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("CreateTopics over OAUTHBEARER: %v %v", err, res)
	}
	bad := SASLDialer(nil, nil, OAuthBearerSASLClient(tok("ctl", time.Now().Add(-time.Hour))))
	if conn, err := bad(ctx(t), "tcp", lead.Addr()); !errors.Is(err, ErrSASLFailed) || !strings.Contains(err.Error(), "invalid_token") {
		if conn != nil {
			conn.Close()
		}
		t.Fatalf("expired token: %v, want ErrSASLFailed", err)
	}
}

// unsecuredJWT is an unsecured JWS (alg none) for sub expiring at exp, as
// Kafka's unsecured login handler makes.
func unsecuredJWT(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(map[string]any{"sub": sub, "iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": exp.Unix()})
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(claims) + "."
}

func saslFailures(c *Controller) float64 {
	var m dto.Metric
	c.metrics.saslFailures.Write(&m)
	return m.GetCounter().GetValue()
}

// TestSASLMalformedExchangeRefused: a first SASL frame whose mechanism
// name overruns it, and an exchange that never ends (more than
// maxSASLSteps continues), close the connection and are counted.
func TestSASLMalformedExchangeRefused(t *testing.T) {
	srv := &SASLServer{Mechanisms: map[string]sasl.Mechanism{"LOOP": loopMechanism{}}}
	c := newCtrlCluster(t, clusterOpts{n: 1, tcp: true, sasl: srv, dial: SASLDialer(nil, nil, SASLClient{Mechanism: "LOOP", Next: func([]byte) ([]byte, error) { return nil, nil }})})
	lead := c.leader()
	before := saslFailures(lead)
	conn, err := net.DialTimeout("tcp", lead.Addr(), testWait)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bw := bufio.NewWriter(conn)
	if writeFrame(bw, kindSASL, []byte{200, 'P'}) != nil || bw.Flush() != nil {
		t.Fatal("write")
	}
	if err := itestutil.ClosedWithin(conn, testWait); err != nil {
		t.Fatalf("overrunning mechanism name: %v", err)
	}
	conn2, err := net.DialTimeout("tcp", lead.Addr(), testWait)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if err := AuthenticateSASL(ctx(t), conn2, SASLClient{Mechanism: "LOOP", Next: func([]byte) ([]byte, error) { return []byte("again"), nil }}, testWait); err == nil {
		t.Fatal("an endless exchange authenticated")
	}
	// The server counts a refusal as it closes, which the client may see
	// first.
	itestutil.Eventually(t, testWait, func() bool { return saslFailures(lead) >= before+2 },
		"sasl_authentication_failures_total %v, was %v: want both refusals counted", saslFailures(lead), before)
}

// loopMechanism continues forever.
type loopMechanism struct{}

func (loopMechanism) Name() string        { return "LOOP" }
func (loopMechanism) Start() sasl.Session { return loopSession{} }

type loopSession struct{}

func (loopSession) Step([]byte) ([]byte, bool, error) { return []byte("more"), false, nil }
func (loopSession) Principal() string                 { return "" }
func (loopSession) Expiry() time.Time                 { return time.Time{} }
