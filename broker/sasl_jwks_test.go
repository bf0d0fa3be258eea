package broker

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// rs256 signs claims with key as a JWS with kid.
func rs256(t testing.TB, key *rsa.PrivateKey, kid, claims string) string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	in := enc([]byte(fmt.Sprintf(`{"alg":"RS256","typ":"JWT","kid":%q}`, kid))) + "." + enc([]byte(claims))
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return in + "." + enc(sig)
}

func jwksOf(kid string, pub *rsa.PublicKey) []byte {
	enc := base64.RawURLEncoding.EncodeToString
	b, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": enc(pub.N.Bytes()), "e": enc(big.NewInt(int64(pub.E)).Bytes()),
	}}})
	return b
}

// TestSASLOAuthJWKS: OAUTHBEARER validated against a JWKS served over
// HTTP on loopback (sasl.oauthbearer.jwks.endpoint.url, expected audience
// and issuer): a signed token authenticates as its sub; an expired one, one
// for another audience, another issuer, or signed by a key not in the set
// fails with invalid_token. A JWKS given as a file: URL works too.
func TestSASLOAuthJWKS(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	var gets atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(jwksOf("k1", &key.PublicKey))
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, jwksOf("k1", &key.PublicKey), 0o600); err != nil {
		t.Fatal(err)
	}
	n := saslNode(t, map[string]string{
		"listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": srv.URL + "/jwks",
		"listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":       "file://" + file,
		"sasl.oauthbearer.expected.audience":                                          "kafka,other-cluster",
		"sasl.oauthbearer.expected.issuer":                                            "https://idp.test",
	})
	if gets.Load() != 1 {
		t.Fatalf("JWKS fetched %d times at start", gets.Load())
	}
	claims := func(exp time.Time, aud, iss string) string {
		return fmt.Sprintf(`{"sub":"svc-jwks","exp":%d,"iat":%d,"aud":%q,"iss":%q}`, exp.Unix(), time.Now().Unix(), aud, iss)
	}
	hour := time.Now().Add(time.Hour)
	for _, lis := range []string{"SASL_PLAINTEXT", "SASL_SSL"} {
		if err := ping(saslClient(t, n, lis, oauthToken(rs256(t, key, "k1", claims(hour, "kafka", "https://idp.test"))))); err != nil {
			t.Fatalf("%s: valid token: %v", lis, err)
		}
		if p := connPrincipals(n, lis); !strings.Contains(p, "User:svc-jwks") {
			t.Fatalf("%s principals %q", lis, p)
		}
		for name, tok := range map[string]string{
			"expired":        rs256(t, key, "k1", claims(time.Now().Add(-time.Hour), "kafka", "https://idp.test")),
			"wrong audience": rs256(t, key, "k1", claims(hour, "elsewhere", "https://idp.test")),
			"wrong issuer":   rs256(t, key, "k1", claims(hour, "kafka", "https://evil.test")),
			"foreign key":    rs256(t, other, "k1", claims(hour, "kafka", "https://idp.test")),
			"unsecured":      unsecuredJWS(claims(hour, "kafka", "https://idp.test")),
		} {
			err := ping(saslClient(t, n, lis, oauthToken(tok)))
			if !errors.Is(err, kerr.SaslAuthenticationFailed) || !strings.Contains(err.Error(), "invalid_token") {
				t.Fatalf("%s: %s: %v", lis, name, err)
			}
		}
	}
}

// TestSASLOAuthJWKSUnreachable: a listener whose JWKS cannot be fetched
// does not open (no token could ever be checked).
func TestSASLOAuthJWKSUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := testConfig(t, t.TempDir(), map[string]string{
		"listeners":                          "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"sasl.enabled.mechanisms":            "OAUTHBEARER",
		"sasl.oauthbearer.jwks.endpoint.url": "http://" + addr + "/jwks",
		"inter.broker.listener.name":         "PLAINTEXT",
	})
	n, err := Open(Options{Config: cfg, Logger: testLogger(), StartTimeout: testWait})
	if err == nil {
		n.Close()
		t.Fatal("a node opened with an unreachable JWKS")
	}
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "JWKS") {
		t.Fatalf("error %v", err)
	}
}
