package broker

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSASLReauthRaw (KIP-368) on one hand-driven connection: with
// connections.max.reauth.ms=1000 SaslAuthenticate v2 answers a lifetime of
// 1000ms; re-authenticating (SaslHandshake + SaslAuthenticate again) keeps
// the connection serving past two lifetimes; once it stops, the first
// request past the lifetime closes it. Re-authenticating as another user
// fails and closes; an OAUTHBEARER session is bounded by the token's exp.
func TestSASLReauthRaw(t *testing.T) {
	const life = time.Second
	n := saslNode(t, map[string]string{"listener.name.sasl_plaintext.connections.max.reauth.ms": "1000"})
	addr := n.Addrs()["SASL_PLAINTEXT"]

	rc := dialRawAddr(t, addr)
	r := saslPlainRaw(t, rc, "alice", "alice-secret")
	if r.ErrorCode != 0 || r.SessionLifetimeMillis != life.Milliseconds() {
		t.Fatalf("authenticate: %v lifetime %dms, want %v", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis, life)
	}
	start := time.Now()
	expiry := start.Add(life)
	for time.Since(start) < 5*life/2 {
		if time.Until(expiry) < life/3 {
			if r := saslPlainRaw(t, rc, "alice", "alice-secret"); r.ErrorCode != 0 || r.SessionLifetimeMillis != life.Milliseconds() {
				t.Fatalf("re-authenticate: %v lifetime %d", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis)
			}
			expiry = time.Now().Add(life)
		}
		if m := rc.roundTrip(metadataReq()).(*kmsg.MetadataResponse); len(m.Brokers) != 1 {
			t.Fatalf("metadata: %+v", m)
		}
		time.Sleep(50 * time.Millisecond) // pacing the client, not a synchronisation
	}
	// No more re-authentication: past the lifetime the next request closes.
	time.Sleep(time.Until(expiry) + 50*time.Millisecond) // waiting for the session's end itself
	rc.send(metadataReq())
	rc.expectClosed()

	// An unused connection past its lifetime may still re-authenticate.
	rc = dialRawAddr(t, addr)
	saslPlainRaw(t, rc, "alice", "alice-secret")
	time.Sleep(life + 50*time.Millisecond)
	if r := saslPlainRaw(t, rc, "alice", "alice-secret"); r.ErrorCode != 0 {
		t.Fatalf("late re-authentication: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	rc.roundTrip(metadataReq())

	// Re-authentication may not change the principal.
	rc = dialRawAddr(t, addr)
	saslPlainRaw(t, rc, "alice", "alice-secret")
	if r := saslPlainRaw(t, rc, "admin", "admin-secret"); r.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as admin: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	rc.expectClosed()

	// OAUTHBEARER: the lifetime is the token's, when shorter.
	rc = dialRawAddr(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "OAUTHBEARER"
	rc.roundTrip(hs)
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.SetVersion(1)
	exp := time.Now().Add(600 * time.Millisecond)
	au.SASLAuthBytes = []byte("n,,\x01auth=Bearer " + unsecuredJWS(fmt.Sprintf(`{"sub":"svc","exp":%.3f}`, float64(exp.UnixMilli())/1000)) + "\x01\x01")
	ar := rc.roundTrip(au).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > 600 {
		t.Fatalf("OAUTHBEARER: %v lifetime %d, want (0, 600]", kerr.ErrorForCode(ar.ErrorCode), ar.SessionLifetimeMillis)
	}
}

// TestSASLReauthKgo: franz-go re-authenticates by itself when the broker
// gives a session lifetime. A producer over SASL_PLAINTEXT with
// connections.max.reauth.ms=2000 keeps producing for more than two
// lifetimes without an error, and the broker counts more successful
// authentications than connections opened (the same connections
// re-authenticated); none was closed for an expired session.
func TestSASLReauthKgo(t *testing.T) {
	n := saslNode(t, map[string]string{"connections.max.reauth.ms": "2000"})
	createTopic(t, newAdmin(t, n), "reauth", 1, nil)
	cl := saslClient(t, n, "SASL_PLAINTEXT", plainAuth("alice", "alice-secret"), kgo.DefaultProduceTopic("reauth"))
	var produced atomic.Int64
	start := time.Now()
	for time.Since(start) < 4500*time.Millisecond {
		if err := cl.ProduceSync(testCtx(t), kgo.StringRecord("r")).FirstErr(); err != nil {
			t.Fatalf("produce after %v: %v", time.Since(start), err)
		}
		produced.Add(1)
		time.Sleep(50 * time.Millisecond) // pacing the producer
	}
	opened := counterValue(t, n.metrics.connOpened.WithLabelValues("SASL_PLAINTEXT"))
	auths := counterValue(t, n.metrics.saslSuccess.WithLabelValues("SASL_PLAINTEXT", "PLAIN"))
	if auths < opened+2 {
		t.Fatalf("%v authentications on %v connections: no re-authentication", auths, opened)
	}
	if closed := counterValue(t, n.metrics.connClosed.WithLabelValues("SASL_PLAINTEXT")); closed != 0 {
		t.Fatalf("%v connections closed while producing", closed)
	}
	t.Logf("%d records in %v, %v connections, %v authentications", produced.Load(), time.Since(start).Round(time.Millisecond), opened, auths)
}
