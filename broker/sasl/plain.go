package sasl

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"time"
)

// PLAIN (RFC 4616): one client message, authzid NUL authcid NUL passwd,
// checked against a fixed user table (Kafka's PlainLoginModule
// user_<name>="<password>" options). The server sends nothing back.
//
// As Kafka's PlainSaslServer: an authorization id, when given, must equal
// the user name; an unknown user and a wrong password fail with the same
// message; the compare is constant time (over SHA-256 digests, so neither
// the password's length nor whether the user exists shows in the time).

// plainFailure is Kafka's PlainSaslServer message for every bad
// credential, whichever part was wrong.
const plainFailure = "Authentication failed: Invalid username or password"

// Plain is the PLAIN mechanism over a user table. Safe for concurrent use;
// the table is not modified after NewPlain.
type Plain struct {
	users map[string][sha256.Size]byte // user → SHA-256(password)
}

// NewPlain returns PLAIN over users (name → password); the map is copied.
func NewPlain(users map[string]string) *Plain {
	p := &Plain{users: make(map[string][sha256.Size]byte, len(users))}
	for u, pw := range users {
		p.users[u] = sha256.Sum256([]byte(pw))
	}
	return p
}

// Name is "PLAIN".
func (*Plain) Name() string { return "PLAIN" }

// Start begins one exchange.
func (p *Plain) Start() Session { return &plainSession{p: p} }

type plainSession struct {
	p    *Plain
	user string
	done bool
}

// absent is compared against when the user is unknown, so the time taken
// does not tell a missing user from a wrong password.
var absent = sha256.Sum256([]byte("\x00strata: no such user\x00"))

func (s *plainSession) Step(in []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, fmt.Errorf("%w: PLAIN exchange already complete", ErrAuthentication)
	}
	parts := bytes.Split(in, []byte{0})
	if len(parts) != 3 {
		return nil, false, fmt.Errorf("%w: Invalid SASL/PLAIN response: expected 3 tokens, got %d", ErrAuthentication, len(parts))
	}
	authzid, user, pass := string(parts[0]), string(parts[1]), parts[2]
	if user == "" {
		return nil, false, fmt.Errorf("%w: Authentication failed: username not specified", ErrAuthentication)
	}
	if len(pass) == 0 {
		return nil, false, fmt.Errorf("%w: Authentication failed: password not specified", ErrAuthentication)
	}
	want, ok := s.p.users[user]
	if !ok {
		want = absent
	}
	got := sha256.Sum256(pass)
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 || !ok {
		return nil, false, fmt.Errorf("%w: %s", ErrAuthentication, plainFailure)
	}
	if authzid != "" && authzid != user {
		return nil, false, fmt.Errorf("%w: Authentication failed: Client requested an authorization id that is different from username", ErrAuthentication)
	}
	s.user, s.done = user, true
	return nil, true, nil
}

func (s *plainSession) Principal() string { return s.user }
func (s *plainSession) Expiry() time.Time { return time.Time{} }
