package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

func TestParseJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a\"b;c" user_bob=bare;`)
	if err != nil {
		t.Fatal(err)
	}
	if j.LoginModule != PlainLoginModule || j.Flag != "required" || j.Options["username"] != "admin" {
		t.Fatalf("%+v", j)
	}
	want := map[string]string{"admin": "admin-secret", "alice": `a"b;c`, "bob": "bare"}
	got := j.PlainUsers()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("users %v, want %v", got, want)
	}
	for _, bad := range []string{
		``, `X`, `X required`, `X required a="b"`, `X bogus;`, `X required a=;`, `X required a "b";`,
		`X required a="unterminated;`, `X required; Y required;`,
	} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("ParseJAAS(%q) accepted", bad)
		}
	}
	if _, err := ParseJAAS(`X required password="hunter2" user_x`); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error quotes the secret or is nil: %v", err)
	}
}

func plainMsg(t *testing.T, zid, user, pass string) []byte {
	_, b, err := plain.Auth{Zid: zid, User: user, Pass: pass}.AsMechanism().Authenticate(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPlain(t *testing.T) {
	m := NewPlain(map[string]string{"alice": "alice-secret", "bob": "b"})
	s := m.Start()
	out, done, err := s.Step(plainMsg(t, "", "alice", "alice-secret"))
	if err != nil || !done || out != nil || s.Principal() != "alice" || !s.Expiry().IsZero() {
		t.Fatalf("good: %q %v %v %q", out, done, err, s.Principal())
	}
	if _, _, err := s.Step(plainMsg(t, "", "alice", "alice-secret")); err == nil {
		t.Fatal("a second step of a finished exchange succeeded")
	}
	if _, done, err := m.Start().Step(plainMsg(t, "alice", "alice", "alice-secret")); err != nil || !done {
		t.Fatalf("authzid = user: %v", err)
	}
	var msgs []string
	for _, in := range [][]byte{
		plainMsg(t, "", "alice", "wrong"),
		plainMsg(t, "", "nobody", "alice-secret"),
		plainMsg(t, "", "alice", "alice-secretX"),
		plainMsg(t, "", "bob", "alice-secret"),
	} {
		_, done, err := m.Start().Step(in)
		if done || !errors.Is(err, ErrAuthentication) {
			t.Fatalf("bad credentials accepted: %v", err)
		}
		msgs = append(msgs, err.Error())
	}
	for _, msg := range msgs {
		if msg != msgs[0] || !strings.Contains(msg, "Invalid username or password") {
			t.Fatalf("failure texts differ or say which part was wrong: %q", msgs)
		}
	}
	for _, in := range []string{"", "a\x00b", "a\x00b\x00c\x00d", "\x00\x00p", "\x00alice\x00", "bob\x00alice\x00alice-secret"} {
		if _, done, err := m.Start().Step([]byte(in)); done || err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func unsecuredToken(claims string) string {
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(claims)) + "."
}

func oauthMsg(t *testing.T, token string) []byte {
	_, b, err := oauth.Auth{Token: token, Extensions: map[string]string{"traceId": "x"}}.AsMechanism().Authenticate(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runOAuth runs an exchange as franz-go's client would: its first
// message, then ^A after a challenge. It returns the principal or the
// final error.
func runOAuth(t *testing.T, v TokenValidator, token string) (Session, error) {
	t.Helper()
	s := NewOAuthBearer(v).Start()
	out, done, err := s.Step(oauthMsg(t, token))
	if err != nil {
		return s, err
	}
	if done {
		if out != nil {
			t.Fatalf("reply on success: %q", out)
		}
		return s, nil
	}
	var js map[string]string
	if json.Unmarshal(out, &js) != nil || js["status"] == "" {
		t.Fatalf("challenge %q is not Kafka's JSON", out)
	}
	_, done, err = s.Step([]byte{1})
	if done || err == nil {
		t.Fatalf("^A after the challenge: done=%v err=%v", done, err)
	}
	if !strings.Contains(err.Error(), string(out)) {
		t.Fatalf("final error %q lacks the challenge %q", err, out)
	}
	return s, err
}

func TestOAuthUnsecured(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	u, err := NewUnsecured(map[string]string{"unsecuredValidatorRequiredScope": "kafka"})
	if err != nil {
		t.Fatal(err)
	}
	u.Now = func() time.Time { return now }
	exp := now.Add(time.Hour).Unix()
	s, err := runOAuth(t, u, unsecuredToken(fmt.Sprintf(`{"sub":"alice","exp":%d,"iat":%d,"scope":"kafka other"}`, exp, now.Unix())))
	if err != nil || s.Principal() != "alice" || s.Expiry().Unix() != exp {
		t.Fatalf("valid token: %v %q %v", err, s.Principal(), s.Expiry())
	}
	for name, c := range map[string]struct{ token, status string }{
		"expired":       {unsecuredToken(fmt.Sprintf(`{"sub":"alice","exp":%d,"scope":"kafka"}`, now.Add(-time.Second).Unix())), "invalid_token"},
		"no exp":        {unsecuredToken(`{"sub":"alice","scope":"kafka"}`), "invalid_token"},
		"no sub":        {unsecuredToken(fmt.Sprintf(`{"exp":%d,"scope":"kafka"}`, exp)), "invalid_token"},
		"future iat":    {unsecuredToken(fmt.Sprintf(`{"sub":"a","exp":%d,"iat":%d,"scope":"kafka"}`, exp, exp)), "invalid_token"},
		"exp a string":  {unsecuredToken(`{"sub":"alice","exp":"soon","scope":"kafka"}`), "invalid_token"},
		"no scope":      {unsecuredToken(fmt.Sprintf(`{"sub":"alice","exp":%d}`, exp)), "insufficient_scope"},
		"signed":        {strings.TrimSuffix(unsecuredToken(fmt.Sprintf(`{"sub":"a","exp":%d,"scope":"kafka"}`, exp)), ".") + ".c2ln", "invalid_token"},
		"alg HS256":     {enc([]byte(`{"alg":"HS256"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":"a","exp":%d,"scope":"kafka"}`, exp))) + ".", "invalid_token"},
		"two parts":     {"abc.def", "invalid_token"},
		"not base64":    {"!!.!!.", "invalid_token"},
		"payload array": {enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`[1]`)) + ".", "invalid_token"},
	} {
		_, err := runOAuth(t, u, c.token)
		if err == nil || !strings.Contains(err.Error(), `"status":"`+c.status+`"`) {
			t.Errorf("%s: %v, want status %s", name, err, c.status)
		}
	}
	// Malformed initial responses fail at once, without a challenge.
	for _, in := range []string{"", "n,,", "p=x,,\x01auth=Bearer t\x01\x01", "n,,\x01auth=Basic t\x01\x01", "n,,\x01auth=Bearer t\x01", "n,,\x01x=y\x01\x01"} {
		if out, done, err := NewOAuthBearer(u).Start().Step([]byte(in)); done || err == nil || out != nil {
			t.Errorf("%q: out=%q done=%v err=%v", in, out, done, err)
		}
	}
}

// signedToken builds a JWS signed by key (RSA or EC) with alg and kid.
func signedToken(t *testing.T, key crypto.Signer, alg, kid, claims string) string {
	t.Helper()
	h := fmt.Sprintf(`{"alg":%q,"typ":"JWT","kid":%q}`, alg, kid)
	in := enc([]byte(h)) + "." + enc([]byte(claims))
	sum := sha256.Sum256([]byte(in))
	var sig []byte
	switch k := key.(type) {
	case *rsa.PrivateKey:
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:]); err != nil {
			t.Fatal(err)
		}
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	}
	return in + "." + enc(sig)
}

// JWKSDoc renders public keys as a JWKS document, for tests.
func jwksDoc(keys map[string]crypto.PublicKey) []byte {
	var out []map[string]string
	for kid, k := range keys {
		switch k := k.(type) {
		case *rsa.PublicKey:
			out = append(out, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "n": enc(k.N.Bytes()), "e": enc(big.NewInt(int64(k.E)).Bytes())})
		case *ecdsa.PublicKey:
			x, y := make([]byte, 32), make([]byte, 32)
			k.X.FillBytes(x)
			k.Y.FillBytes(y)
			out = append(out, map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "x": enc(x), "y": enc(y)})
		}
	}
	b, _ := json.Marshal(map[string]any{"keys": out})
	return b
}

func TestOAuthJWKS(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	doc := jwksDoc(map[string]crypto.PublicKey{"r1": &rk.PublicKey, "e1": &ek.PublicKey})
	fetches := 0
	now := time.Unix(1_800_000_000, 0)
	v, err := NewJWKS(context.Background(), JWKSConfig{
		Fetch:    func(context.Context) ([]byte, error) { fetches++; return doc, nil },
		Audience: []string{"kafka"}, Issuer: "https://issuer.test", ClockSkew: 30 * time.Second,
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	exp := now.Add(time.Hour).Unix()
	good := fmt.Sprintf(`{"sub":"svc","exp":%d,"aud":["x","kafka"],"iss":"https://issuer.test"}`, exp)
	for _, tok := range []string{signedToken(t, rk, "RS256", "r1", good), signedToken(t, ek, "ES256", "e1", good)} {
		s, err := runOAuth(t, v, tok)
		if err != nil || s.Principal() != "svc" {
			t.Fatalf("valid token refused: %v", err)
		}
	}
	for name, tok := range map[string]string{
		"expired":        signedToken(t, rk, "RS256", "r1", fmt.Sprintf(`{"sub":"svc","exp":%d,"aud":"kafka","iss":"https://issuer.test"}`, now.Add(-time.Minute).Unix())),
		"wrong audience": signedToken(t, rk, "RS256", "r1", fmt.Sprintf(`{"sub":"svc","exp":%d,"aud":"other","iss":"https://issuer.test"}`, exp)),
		"no audience":    signedToken(t, rk, "RS256", "r1", fmt.Sprintf(`{"sub":"svc","exp":%d,"iss":"https://issuer.test"}`, exp)),
		"wrong issuer":   signedToken(t, rk, "RS256", "r1", fmt.Sprintf(`{"sub":"svc","exp":%d,"aud":"kafka","iss":"https://evil"}`, exp)),
		"foreign key":    signedToken(t, other, "ES256", "e1", good),
		"alg mismatch":   signedToken(t, ek, "RS256", "e1", good),
		"unknown kid":    signedToken(t, rk, "RS256", "r9", good),
		"unsecured":      unsecuredToken(good),
		"tampered":       signedToken(t, rk, "RS256", "r1", good)[:20] + "x" + signedToken(t, rk, "RS256", "r1", good)[21:],
	} {
		if _, err := runOAuth(t, v, tok); err == nil || !strings.Contains(err.Error(), "invalid_token") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Within the clock skew, an expired token still passes.
	skewed := signedToken(t, rk, "RS256", "r1", fmt.Sprintf(`{"sub":"svc","exp":%d,"aud":"kafka","iss":"https://issuer.test"}`, now.Add(-10*time.Second).Unix()))
	if _, err := runOAuth(t, v, skewed); err != nil {
		t.Fatalf("within skew: %v", err)
	}
	if fetches != 1 {
		t.Fatalf("fetches %d", fetches)
	}

	// Refresh: a rotated key is picked up once Run refetches (kicked by
	// the unknown kid, as the minimum interval has passed).
	rotated, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	doc = jwksDoc(map[string]crypto.PublicKey{"e2": &rotated.PublicKey})
	now = now.Add(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go v.Run(ctx)
	tok := signedToken(t, rotated, "ES256", "e2", good)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := v.Validate(tok); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rotated key never accepted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := NewJWKS(context.Background(), JWKSConfig{Fetch: func(context.Context) ([]byte, error) { return []byte(`{"keys":[]}`), nil }}); err == nil {
		t.Fatal("an empty key set was accepted")
	}
}
