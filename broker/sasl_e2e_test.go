package broker

import (
	"context"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/strata-io/strata/internal/testutil"
)

const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`

// saslNode starts a node with PLAINTEXT (inter-broker), SASL_PLAINTEXT
// and SASL_SSL listeners offering PLAIN (users admin, alice) and
// OAUTHBEARER (unsecured); extra overrides.
func saslNode(t testing.TB, extra map[string]string) *Node {
	t.Helper()
	ca := newTestCA(t, "sasl CA")
	k, c := ca.issue(t, pkix.Name{CommonName: "broker"})
	props := map[string]string{
		"listeners":                  "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"inter.broker.listener.name": "PLAINTEXT",
		"sasl.enabled.mechanisms":    "PLAIN,OAUTHBEARER",
		"sasl.jaas.config":           plainJAAS,
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`,
		"listener.name.sasl_ssl.oauthbearer.sasl.jaas.config":       `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`,
		"ssl.keystore.type":           "PEM",
		"ssl.keystore.location":       writeKeystore(t, filepath.Join(t.TempDir(), "broker.pem"), k, c),
		"ssl.truststore.type":         "PEM",
		"ssl.truststore.certificates": string(ca.pem),
	}
	for k, v := range extra {
		props[k] = v
	}
	n := startNode(t, t.TempDir(), props)
	saslCAs[n] = ca
	return n
}

// saslCAs are the CAs of saslNode's SASL_SSL listeners, for clients.
var saslCAs = map[*Node]*testCA{}

// saslClient is a kgo client of n's listener authenticating with mech.
func saslClient(t testing.TB, n *Node, listener string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(n.Addrs()[listener]), kgo.RetryTimeout(5 * time.Second)}, opts...)
	if listener == "SASL_SSL" {
		opts = append(opts, kgo.DialTLSConfig(clientTLS(t, saslCAs[n], nil, nil)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func plainAuth(user, pass string) kgo.Opt {
	return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
}

// ping is a Metadata round trip of cl within 10s.
func ping(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestSASLPlain: PLAIN over SASL_PLAINTEXT and SASL_SSL: the right
// password produces and consumes, and the connection's principal is
// User:alice; a wrong password and an unknown user both fail with
// SASL_AUTHENTICATION_FAILED and the same message, counted.
func TestSASLPlain(t *testing.T) {
	n := saslNode(t, nil)
	for _, lis := range []string{"SASL_PLAINTEXT", "SASL_SSL"} {
		t.Run(lis, func(t *testing.T) {
			cl := saslClient(t, n, lis, plainAuth("alice", "alice-secret"), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("sasl-"+strings.ToLower(lis)),
				kgo.ConsumeTopics("sasl-"+strings.ToLower(lis)), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			ctx := testCtx(t)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("over " + lis)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil || len(fs.Records()) != 1 || string(fs.Records()[0].Value) != "over "+lis {
				t.Fatalf("consume: %v %v", err, fs.Records())
			}
			if p := connPrincipals(n, lis); !strings.Contains(p, "User:alice") || strings.Contains(p, "ANONYMOUS") {
				t.Fatalf("principals on %s: %q", lis, p)
			}
			var msgs []string
			for _, cred := range [][2]string{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
				err := ping(saslClient(t, n, lis, plainAuth(cred[0], cred[1])))
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Fatalf("%v: %v, want SASL_AUTHENTICATION_FAILED", cred, err)
				}
				msgs = append(msgs, strings.ReplaceAll(err.Error(), cred[0], "USER"))
			}
			if msgs[0] != msgs[1] {
				t.Fatalf("a wrong password and an unknown user fail differently:\n%s\n%s", msgs[0], msgs[1])
			}
			if got := counterValue(t, n.metrics.saslFailure.WithLabelValues(lis, "PLAIN")); got < 2 {
				t.Fatalf("failures counted: %v", got)
			}
			if got := counterValue(t, n.metrics.saslSuccess.WithLabelValues(lis, "PLAIN")); got < 1 {
				t.Fatalf("successes counted: %v", got)
			}
		})
	}
}

// dialRawAddr is dialRaw to one listener's address.
func dialRawAddr(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, testWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(testWait))
	return &rawConn{t: t, nc: nc}
}

// saslPlainRaw authenticates rc with PLAIN through SaslHandshake v1 and
// SaslAuthenticate v2 and returns the authenticate response.
func saslPlainRaw(t testing.TB, rc *rawConn, user, pass string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if r := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(2)
	au.SASLAuthBytes = []byte("\x00" + user + "\x00" + pass)
	return rc.roundTrip(au).(*kmsg.SASLAuthenticateResponse)
}

func metadataReq() kmsg.Request {
	m := kmsg.NewPtrMetadataRequest()
	m.SetVersion(9)
	return m
}

// TestSASLBeforeAuthentication: on a SASL listener ApiVersions is served
// before authentication; any other request, a frame above
// sasl.server.max.receive.size, or silence past the authentication
// timeout closes the connection; an unknown mechanism is
// UNSUPPORTED_SASL_MECHANISM with the enabled list, then closes; a
// SaslHandshake v0 exchange runs on bare tokens.
func TestSASLBeforeAuthentication(t *testing.T) {
	n := saslNode(t, map[string]string{"strata.sasl.authentication.timeout.ms": "1500", "sasl.server.max.receive.size": "4096"})
	addr := n.Addrs()["SASL_PLAINTEXT"]

	rc := dialRawAddr(t, addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	avr := rc.roundTrip(av).(*kmsg.ApiVersionsResponse)
	vers := map[int16][2]int16{}
	for _, k := range avr.ApiKeys {
		vers[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if vers[17] != [2]int16{0, 1} || vers[36] != [2]int16{0, 2} {
		t.Fatalf("advertised SaslHandshake %v, SaslAuthenticate %v", vers[17], vers[36])
	}
	rc.send(metadataReq())
	rc.expectClosed()

	// The same request after authentication is answered.
	rc = dialRawAddr(t, addr)
	if r := saslPlainRaw(t, rc, "alice", "alice-secret"); r.ErrorCode != 0 || r.SessionLifetimeMillis != 0 {
		t.Fatalf("authenticate: %v lifetime %d", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis)
	}
	if r := rc.roundTrip(metadataReq()).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
		t.Fatalf("metadata after authentication: %+v", r)
	}
	// SaslAuthenticate once authenticated, without a new handshake: ILLEGAL_SASL_STATE, closed.
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(1)
	au.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
	if r := rc.roundTrip(au).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("authenticate without handshake: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	rc.expectClosed()

	// An oversized frame before authentication.
	rc = dialRawAddr(t, addr)
	big := kmsg.NewPtrSASLHandshakeRequest()
	big.SetVersion(1)
	big.Mechanism = strings.Repeat("x", 5000)
	rc.send(big)
	rc.expectClosed()

	// Unknown mechanism (kafka-go's TestUnsupportedSASLMechanism sends FOO).
	rc = dialRawAddr(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "FOO"
	r := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse)
	if r.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(r.SupportedMechanisms, ",") != "PLAIN,OAUTHBEARER" {
		t.Fatalf("FOO: %v %v", kerr.ErrorForCode(r.ErrorCode), r.SupportedMechanisms)
	}
	rc.expectClosed()

	// SaslHandshake v0: the tokens follow as bare size-prefixed frames.
	for _, pass := range []string{"alice-secret", "wrong"} {
		rc = dialRawAddr(t, addr)
		hs.SetVersion(0)
		hs.Mechanism = "PLAIN"
		if r := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("v0 handshake: %v", kerr.ErrorForCode(r.ErrorCode))
		}
		tok := []byte("\x00alice\x00" + pass)
		if _, err := rc.nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...)); err != nil {
			t.Fatal(err)
		}
		if pass != "alice-secret" {
			rc.expectClosed() // a failed v0 exchange is closed without an answer, as Kafka
			break
		}
		var reply [4]byte
		if _, err := io.ReadFull(rc.nc, reply[:]); err != nil || binary.BigEndian.Uint32(reply[:]) != 0 {
			t.Fatalf("v0 PLAIN reply %x %v, want an empty token", reply, err)
		}
		if r := rc.roundTrip(metadataReq()).(*kmsg.MetadataResponse); len(r.Brokers) != 1 {
			t.Fatalf("metadata after a v0 exchange: %+v", r)
		}
		if p := connPrincipals(n, "SASL_PLAINTEXT"); !strings.Contains(p, "User:alice") {
			t.Fatalf("principals %q", p)
		}
	}

	// A wrong password: SASL_AUTHENTICATION_FAILED, then closed.
	rc = dialRawAddr(t, addr)
	if r := saslPlainRaw(t, rc, "alice", "nope"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil ||
		*r.ErrorMessage != "Authentication failed: Invalid username or password" {
		t.Fatalf("wrong password: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	rc.expectClosed()

	// Silence: closed after the authentication timeout, not the idle one.
	rc = dialRawAddr(t, addr)
	start := time.Now()
	rc.expectClosedWithin(10 * time.Second)
	if took := time.Since(start); took < time.Second {
		t.Fatalf("closed after %v, before the 1.5s timeout", took)
	}

	// A PLAINTEXT listener answers SASL requests with ILLEGAL_SASL_STATE.
	rc = dialRawAddr(t, n.Addrs()["PLAINTEXT"])
	hs.SetVersion(1)
	if r := rc.roundTrip(hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("handshake on PLAINTEXT: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}

// expectClosedWithin is expectClosed with a longer wait.
func (c *rawConn) expectClosedWithin(d time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	var b [1]byte
	n, err := c.nc.Read(b[:])
	var ne net.Error
	if err == nil || n > 0 || (errors.As(err, &ne) && ne.Timeout()) {
		c.t.Fatalf("connection not closed within %v (read %d bytes, err %v)", d, n, err)
	}
}

func unsecuredJWS(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}

func oauthToken(token string) kgo.Opt {
	return kgo.SASL(oauth.Auth{Token: token}.AsMechanism())
}

// TestSASLOAuthUnsecured: Kafka's default OAUTHBEARER validator, as kgo's
// TestOAuthAuth checks it: an unsecured token with sub and a future exp
// authenticates as User:<sub>; an expired one fails with
// SASL_AUTHENTICATION_FAILED whose text holds invalid_token.
func TestSASLOAuthUnsecured(t *testing.T) {
	n := saslNode(t, nil)
	for _, lis := range []string{"SASL_PLAINTEXT", "SASL_SSL"} {
		good := unsecuredJWS(fmt.Sprintf(`{"sub":"svc-%s","exp":%d}`, strings.ToLower(lis), time.Now().Add(time.Hour).Unix()))
		if err := ping(saslClient(t, n, lis, oauthToken(good))); err != nil {
			t.Fatalf("%s: %v", lis, err)
		}
		if p := connPrincipals(n, lis); !strings.Contains(p, "User:svc-"+strings.ToLower(lis)) {
			t.Fatalf("principals %q", p)
		}
		expired := unsecuredJWS(fmt.Sprintf(`{"sub":"svc","exp":%d}`, time.Now().Add(-time.Minute).Unix()))
		err := ping(saslClient(t, n, lis, oauthToken(expired)))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid_token") {
			t.Fatalf("%s expired token: %v", lis, err)
		}
	}
	if got := counterValue(t, n.metrics.saslFailure.WithLabelValues("SASL_SSL", "OAUTHBEARER")); got < 1 {
		t.Fatalf("failures counted: %v", got)
	}
}

// TestSASLRequestAuthorized: the SASL principal is what the authorizer
// sees: alice without ACLs cannot create a topic, admin (a super user)
// can.
func TestSASLRequestAuthorized(t *testing.T) {
	n := saslNode(t, map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:admin;User:ANONYMOUS",
	})
	create := func(user, pass, topic string) error {
		cl := saslClient(t, n, "SASL_PLAINTEXT", plainAuth(user, pass))
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err := create("alice", "alice-secret", "by-alice"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if err := create("admin", "admin-secret", "by-admin"); err != nil {
		t.Fatalf("admin: %v", err)
	}
}

// TestSASLInterBroker: three nodes whose inter-broker listener INTERNAL
// is SASL_PLAINTEXT: the followers authenticate with
// sasl.mechanism.inter.broker.protocol, PLAIN with the jaas config's
// username/password (User:admin) or OAUTHBEARER with Kafka's unsecured
// login token (User:broker), and replicate.
func TestSASLInterBroker(t *testing.T) {
	for _, tc := range []struct{ mech, jaas, principal string }{
		{"PLAIN", plainJAAS, "User:admin"},
		{"OAUTHBEARER", `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`, "User:broker"},
	} {
		t.Run(tc.mech, func(t *testing.T) {
			extra := map[string]string{
				"listener.security.protocol.map":                                           "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
				"inter.broker.listener.name":                                               "INTERNAL",
				"sasl.mechanism.inter.broker.protocol":                                     tc.mech,
				"listener.name.internal.sasl.enabled.mechanisms":                           tc.mech,
				"listener.name.internal." + strings.ToLower(tc.mech) + ".sasl.jaas.config": tc.jaas,
			}
			own := map[int32]map[string]string{1: {"listeners": "PLAINTEXT://127.0.0.2:0,INTERNAL://127.0.0.2:0,CONTROLLER://127.0.0.2:0"}}
			for id := int32(2); id <= 3; id++ {
				own[id] = map[string]string{"listeners": fmt.Sprintf("PLAINTEXT://127.0.0.%d:0,INTERNAL://127.0.0.%d:0", id+1, id+1)}
			}
			cl3 := startClusterWith(t, 3, extra, own)
			cl := cl3.client()
			createReplicatedTopic(t, cl, "saslrepl", 2, 3, nil)
			produceN(t, cl, "saslrepl", 0, 100)
			for p := int32(0); p < 2; p++ {
				if b := cl3.waitReplicasIdentical("saslrepl", p); len(b) == 0 {
					t.Fatalf("partition %d: empty", p)
				}
			}
			testutil.Eventually(t, testWait, func() bool {
				for id := int32(1); id <= 3; id++ {
					if strings.Contains(connPrincipals(cl3.node(id), "INTERNAL"), tc.principal) {
						return true
					}
				}
				return false
			}, "a connection on INTERNAL as %s", tc.principal)
		})
	}
}

// TestSASLKcat: kcat (librdkafka, a codec of its own) produces and
// consumes over SASL_SSL with PLAIN; a wrong password gets nothing.
func TestSASLKcat(t *testing.T) {
	kcat := needClient(t, "kcat", "-V")
	n := saslNode(t, nil)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, saslCAs[n].pem, 0o600); err != nil {
		t.Fatal(err)
	}
	sec := func(pass string) []string {
		return []string{"-b", n.Addrs()["SASL_SSL"], "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location=" + caFile,
			"-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=" + pass}
	}
	createTopic(t, newAdmin(t, n), "kc-sasl", 1, nil)
	var in strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&in, "k%d:v%d\n", i, i)
	}
	runClient(t, []byte(in.String()), kcat, append(sec("alice-secret"), "-P", "-t", "kc-sasl", "-K:", "-X", "acks=all")...)
	out := runClient(t, nil, kcat, append(sec("alice-secret"), "-C", "-t", "kc-sasl", "-o", "beginning", "-c", "20", "-e", "-K:", "-f", "%k:%s\n")...)
	if string(out) != in.String() {
		t.Fatalf("kcat consumed over SASL_SSL:\n%s\nwant:\n%s", out, in.String())
	}
	if p := connPrincipals(n, "SASL_SSL"); strings.Contains(p, "ANONYMOUS") {
		t.Fatalf("principals %q", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, append(sec("wrong"), "-L", "-m", "5")...)
	b, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("kcat with a wrong password listed metadata:\n%s", b)
	}
	if !strings.Contains(string(b), "Invalid username or password") {
		t.Fatalf("kcat's error does not carry the broker's message:\n%s", b)
	}
}

// TestSASLFailedAuthenticationDelay: connection.failed.authentication.delay.ms
// holds a failed authentication's answer (and the close after it) that
// long; a successful one is not delayed; its bounds are in TestSASLConfig.
func TestSASLFailedAuthenticationDelay(t *testing.T) {
	const delay = 400 * time.Millisecond
	n := saslNode(t, map[string]string{"connection.failed.authentication.delay.ms": "400"})
	rc := dialRawAddr(t, n.Addrs()["SASL_PLAINTEXT"])
	start := time.Now()
	if r := saslPlainRaw(t, rc, "alice", "wrong"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("wrong password: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("the failure was answered after %v, want at least %v", took, delay)
	}
	rc.expectClosedWithin(testWait)
	ok := dialRawAddr(t, n.Addrs()["SASL_PLAINTEXT"])
	if r := saslPlainRaw(t, ok, "alice", "alice-secret"); r.ErrorCode != 0 {
		t.Fatalf("right password: %v", kerr.ErrorForCode(r.ErrorCode))
	}
}
